"""Imports only go down.

Between the top folders: scripts -> schedules -> workers -> memory_core. Inside memory_core,
between its packages (the table ``MAY_NOT`` below): the chat side never reaches the workers'
write path or the extractor, the memory model never reaches what is built on it, and the
shared base (settings, clock, errors, jobs, log, validate, vectors, status, db, embedders,
brokers, heartbeats) reaches none of the packages; ``health`` (the operator's checks) reads
the stores, the ledger and the mirror cursors, and nothing imports it. Imports inside
functions count too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.imports import imported_modules

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["memory_core", "workers", "schedules", "scripts"]  # lowest first

PACKAGES = ("chat", "recall", "write", "extraction", "model", "mirrors", "maintenance",
            "health")
BASE = "base"  # every memory_core module outside PACKAGES (memory_core/__init__.py aside)

# part of memory_core -> the parts it must never import
MAY_NOT: dict[str, set[str]] = {
    "chat": {"write", "extraction", "maintenance", "mirrors", "health"},
    "recall": {"chat", "write", "extraction", "maintenance", "mirrors", "health"},
    "write": {"chat", "maintenance", "health"},
    "extraction": {"chat", "recall", "write", "maintenance", "mirrors", "health"},
    "mirrors": {"chat", "recall", "write", "extraction", "maintenance", "health"},
    "maintenance": {"chat", "health"},
    "model": {"chat", "recall", "write", "extraction", "maintenance", "mirrors", "health"},
    # Health reads the stores, the ledger and the mirror cursors; nothing is built on it.
    "health": {"chat", "recall", "write", "extraction"},
    BASE: set(PACKAGES),
}


def part_of(module: str) -> str | None:
    """The memory_core part a dotted module belongs to (None outside memory_core)."""
    bits = module.split(".")
    if bits[0] != "memory_core" or len(bits) == 1:
        return None
    return bits[1] if bits[1] in PACKAGES else BASE


def upward_imports(root: Path) -> list[str]:
    """``file imports module (part -> part)`` for every import that breaks ``MAY_NOT``."""
    offenders = []
    for path in sorted((root / "memory_core").rglob("*.py")):
        rel = path.relative_to(root)
        if rel.as_posix() == "memory_core/__init__.py":  # the public API re-exports chat
            continue
        mine = part_of(".".join(rel.with_suffix("").parts))
        assert mine is not None
        for module in sorted(imported_modules(path)):
            theirs = part_of(module)
            if theirs is not None and theirs != mine and theirs in MAY_NOT[mine]:
                offenders.append(f"{rel} imports {module} ({mine} -> {theirs})")
    return offenders


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_never_imports_a_layer_above_it(layer: str) -> None:
    above = set(LAYERS[LAYERS.index(layer) + 1:])
    offenders = []
    for path in (REPO / layer).rglob("*.py"):
        bad = {m.split(".")[0] for m in imported_modules(path)} & above
        if bad:
            offenders.append(f"{path.relative_to(REPO)} imports {sorted(bad)}")
    assert not offenders, offenders


def test_memory_core_packages_only_import_downwards() -> None:
    assert upward_imports(REPO) == []


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The table check fails on a planted upward import, also one inside a function."""
    for rel, text in {
        "memory_core/model/x.py": "def f():\n    from memory_core import write\n",
        "memory_core/chat/y.py": "import memory_core.extraction.heuristic\n",
        "memory_core/settings.py": "from memory_core.model.tenants import HUB\n",
        "memory_core/recall/ok.py": "from memory_core.model import tenants\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert upward_imports(tmp_path) == [
        "memory_core/chat/y.py imports memory_core.extraction.heuristic (chat -> extraction)",
        "memory_core/model/x.py imports memory_core.write (model -> write)",
        "memory_core/settings.py imports memory_core.model.tenants (base -> model)",
    ]


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_the_chat_side_loads_no_worker_code_and_no_model() -> None:
    loaded = _loaded_after("import memory_core, memory_core.embedders, memory_core.db\n"
                           "memory_core.Memory")
    assert "memory_core.chat.memory" in loaded  # the probe imported the chat side
    forbidden = ("workers", "schedules", "scripts", "memory_core.write",
                 "memory_core.extraction", "memory_core.maintenance", "onnxruntime",
                 "fastembed", "dramatiq.brokers.redis")
    bad = sorted(m for m in loaded if m.startswith(forbidden))
    assert bad == []
