import sys

from dashraker.cli import main

sys.exit(main())
