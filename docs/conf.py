"""Sphinx configuration of the dashraker documentation (``make docs``; checked by ``tests/test_docs.py``)."""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "dashraker"
author = "the dashraker engineers"
copyright = "2026, the dashraker engineers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "dashraker_tables",  # docs/_ext: the registry's tables, the energy table and the API module list, generated
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# _generated holds the includes dashraker_tables writes; they are pages' parts, not pages.
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # links such as results/fpga-history.md#some-heading
suppress_warnings = []

# Every cross-reference must resolve (the build runs with -W --keep-going).
nitpicky = True
nitpick_ignore_regex = [
    # annotations of the dataclasses' fields and stdlib/third-party types the docs do not document
    (r"py:class", r"(typing\.)?Callable|collections\.abc\.Callable|object|type|int|str|float|bool|tuple|dict|list"),
    (r"py:class", r"(amaranth|numpy|torch|pathlib|argparse|yaml|distributed|dask)\..*"),
    (r"py:class", r"(np|Path|Enum|NamedTuple|.*\.Signature|.*Component)"),
]

autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # torch.nn.Module.forward's docstring refers to torch's own docs
autodoc_typehints = "none"  # signatures as written; the docstrings say the types in words
autodoc_default_options = {"members": True}

html_theme = "alabaster"
html_title = "dashraker"
html_static_path = []
