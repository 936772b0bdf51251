"""mnemo's optional C extension; everything else about the package is in pyproject.toml.

``memory_core/db/bm25.c`` is keyword ranking in C: an SQLite loadable extension, not a Python
module (``db.sqlite`` loads it by path; ``recall.keyword`` uses it). It is built where a C
compiler and ``sqlite3ext.h`` (Debian: libsqlite3-dev) are found; ``optional``: without them
the install goes on and recall ranks in Python, the same results, slower.
``-ffp-contract=off``: no fused multiply-add, so its doubles are Python's (the same ranking).
"""

import sys

from setuptools import Extension, setup

unix = sys.platform != "win32"
setup(ext_modules=[Extension(
    "memory_core.db._bm25", sources=["memory_core/db/bm25.c"],
    libraries=["m"] if unix else [], extra_compile_args=["-ffp-contract=off"] if unix else [],
    optional=True)])
