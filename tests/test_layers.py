"""Imports only go down: scripts -> schedules -> workers -> memory_core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["memory_core", "workers", "schedules", "scripts"]  # lowest first


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_never_imports_a_layer_above_it(layer: str) -> None:
    above = set(LAYERS[LAYERS.index(layer) + 1:])
    offenders = []
    for path in (REPO / layer).rglob("*.py"):
        bad = _imports(path) & above
        if bad:
            offenders.append(f"{path.relative_to(REPO)} imports {sorted(bad)}")
    assert not offenders, offenders


def test_importing_memory_core_connects_to_nothing_and_loads_no_model() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memory_core, memory_core.embedders, memory_core.db\n"
        "bad = [m for m in ('onnxruntime', 'fastembed', 'workers', 'dramatiq.brokers.redis')"
        " if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
