"""The shape of a health report: named checks, each ok / degraded / unhealthy with a reason.

A check is a function of a ``HealthEnv`` (settings, the time, lazily opened connections)
returning one ``Check`` or a list of them. ``run_checks`` runs each one; a check that raises
is itself a finding (unhealthy, with the error), so one broken store never hides the others.
The report's status is its worst check's; ``EXIT_CODES`` maps it to ``mnemo health``'s exit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memory_core.db.faults import MISSING, fix_for
from memory_core.db.sqlite import Connection, connect
from memory_core.errors import MnemoError, StoreError
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.health")

OK, DEGRADED, UNHEALTHY = "ok", "degraded", "unhealthy"
_RANK = {OK: 0, DEGRADED: 1, UNHEALTHY: 2}
EXIT_CODES = dict(_RANK)  # 0 healthy, 1 degraded, 2 unhealthy (scripts/cli/exit_codes.py)


@dataclass(frozen=True)
class Check:
    """One finding. ``reason`` says what was seen and, when it is not ok, what to do."""

    name: str
    status: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reason": self.reason,
                "detail": self.detail}


class HealthEnv:
    """What the checks share: settings, ``now`` (injected by tests), read-only connections
    opened on first use and closed by ``close()``. Nothing here creates or migrates a file."""

    def __init__(self, settings: Settings, now: datetime) -> None:
        self.settings = settings
        self.now = now
        self._conns: dict[Path, Connection] = {}
        self._closers: list[Callable[[], None]] = []
        self.cache: dict[str, Any] = {}  # what several checks read once (the broker, stats)

    def conn(self, path: Path, what: str) -> Connection:
        """A read-only connection to ``path``; StoreError when the file does not exist."""
        if path not in self._conns:
            if not path.exists():
                raise StoreError(f"{path} ({what}) does not exist: {fix_for(MISSING, path)}")
            self._conns[path] = connect(path, busy_timeout_ms=self.settings.busy_timeout_ms,
                                        readonly=True)
        return self._conns[path]

    @property
    def ops(self) -> Connection:
        return self.conn(self.settings.ops_db_path, "the ops database")

    @property
    def state(self) -> Connection:
        if self.settings.state_backend == "postgres":  # the primary, read-only
            if "primary" not in self.cache:
                from memory_core.db.primary import open_primary

                db = open_primary(self.settings, migrate=False, readonly=True)
                self.on_close(db.close)
                self.cache["primary"] = db.conn
            conn: Connection = self.cache["primary"]
            return conn
        return self.conn(self.settings.state_db_path, "the state database")

    def on_close(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def close(self) -> None:
        for closer in reversed(self._closers):
            closer()
        self._closers = []
        for conn in self._conns.values():
            conn.close()
        self._conns = {}


CheckFn = Callable[[HealthEnv], "Check | list[Check]"]


def run_checks(env: HealthEnv, checks: Sequence[tuple[str, CheckFn]]) -> list[Check]:
    """Run every check; one that raises becomes an unhealthy ``Check`` of its name."""
    out: list[Check] = []
    for name, fn in checks:
        try:
            result = fn(env)
        except MnemoError as e:
            result = Check(name, UNHEALTHY, str(e))
        except Exception as e:  # any failure to look is a finding, not a crash of the report
            log.warning("health_check_failed", check=name, error=type(e).__name__)
            result = Check(name, UNHEALTHY, f"the check could not run ({type(e).__name__}: "
                           f"{str(e)[:200]})")
        out.extend(result if isinstance(result, list) else [result])
    return out


def overall(checks: Sequence[Check]) -> str:
    """The worst status among ``checks`` (ok when there are none)."""
    return max((c.status for c in checks), key=_RANK.__getitem__, default=OK)


def worst(*statuses: str) -> str:
    return max(statuses, key=_RANK.__getitem__)
