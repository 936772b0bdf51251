"""What a Python file imports, read from its syntax tree (the layer and vocabulary tests)."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module == "memory_core":  # ``from memory_core import write``
                names.update(f"memory_core.{alias.name}" for alias in node.names)
    return names
