"""mnemo's core: everything the chat process needs, and everything the workers run.

A package per concern: ``chat`` (``Memory``: recall and after_turn) and ``recall`` run in the
chat process; ``write`` (the post-turn write path), ``extraction``, ``maintenance`` (the
schedules' job bodies) and ``mirrors`` run in workers; ``model`` (the memory and its rules)
serves both; ``brokers``, ``embedders`` and ``db`` are the plug points and stores; the
modules at the top (settings, clock, errors, jobs, log, validate, vectors, status) are the
shared base. Imports only go down (``tests/test_layers.py``).

The public names are imported on first use (PEP 562), so importing one module of the
package (``memory_core.settings`` for the ``mnemo`` CLI's ``--help``) does not load the
chat side with its database and broker libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_core.chat.memory import Memory
    from memory_core.recall import Budget, RecallResult, format_untrusted_block

__all__ = ["Budget", "Memory", "RecallResult", "format_untrusted_block"]

_HOMES = {"Memory": "memory_core.chat.memory", "Budget": "memory_core.recall",
          "RecallResult": "memory_core.recall", "format_untrusted_block": "memory_core.recall"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memory_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
