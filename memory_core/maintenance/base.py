"""What every maintenance job body takes and returns.

A body is ``fn(env: JobEnv, **payload) -> JobReport``: idempotent (a redelivered or re-fired
window must not change the result), resumable after a kill (it commits in short
transactions and can start again from what is already done), and bounded in memory
whatever the corpus size (it streams or pages, it never loads a whole table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dramatiq import Message

from memory_core.db.stores import Database
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex


@dataclass(frozen=True)
class JobEnv:
    """A job's world: settings, the two databases, the vector index and the clock."""

    settings: Settings
    state: Database
    ops: Database
    index: VectorIndex
    now: datetime  # aware UTC: when this run happens (tests inject it)
    window: str  # the firing's window key, e.g. "macro_sleep@2026-12-01T06:00:00Z", or
    #              "manual:<uuid>" for `mnemo schedules fire` / a direct CLI run
    # The worker's broker's ``enqueue_once``: how a body re-sends lost post-turn follow-ups
    # (the completeness check). None: the check only counts them.
    offer: Callable[[Message[Any]], bool] | None = None


@dataclass
class JobReport:
    """What one run did: counts for the ledger and the logs (never memory text)."""

    job: str
    counts: dict[str, int | float | str] = field(default_factory=dict)
    # More work of the same window, enqueued after this run commits (job name, kwargs):
    # reconsolidation chains its partitions this way.
    follow_ups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    done: bool = True  # False: the window continues in a follow-up; the ledger stays open

    def add(self, key: str, n: int = 1) -> None:
        value = self.counts.get(key, 0)
        self.counts[key] = (value if isinstance(value, int) else 0) + n
