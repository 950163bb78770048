"""The ``dashraker`` distribution: one package, whose subpackages are the top-level folders (SPEC section 1).

``dashraker/hw`` is a link to ``hw/``, ``dashraker/sim`` to ``sim/``, ...: every tool that walks the package's folder
(setuptools here, import-linter, editors) finds the subpackages where Python imports them from.
"""

from setuptools import find_packages, setup

setup(
    package_data={"dashraker.hw": ["*.vlt"], "dashraker.mapping": ["configs/*.yaml", "energy/*.yaml", "suites/*.yaml"]},
    packages=find_packages(include=["dashraker", "dashraker.*"]),
)
