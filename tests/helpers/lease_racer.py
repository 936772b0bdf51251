"""One side of the lease race in ``tests/test_leases.py``: a process with its own connection.

Each round every racer waits at the barrier, then claims the same name at the same ``now``;
the round's ``now`` moves past the previous round's expiry, so every round starts free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_core.db.leases import claim
from memory_core.db.stores import Database

RACE_NAME = "race"
ROUND_S = 10.0  # each round's now is ROUND_S later: the previous claim (TTL_S) has lapsed
TTL_S = 5.0


def race(path: str, holder: str, rounds: int, barrier: Any, results: Any) -> None:
    """Claim ``RACE_NAME`` once per round; put (holder, [won per round]) on ``results``."""
    db = Database(Path(path), "ops")
    wins: list[bool] = []
    try:
        for r in range(rounds):
            barrier.wait(timeout=60)
            wins.append(claim(db.conn, RACE_NAME, holder, TTL_S, now=r * ROUND_S))
    finally:
        db.close()
        results.put((holder, wins))
