"""The two databases: ``memory_state.db`` (hot) and ``memory_ops.db`` (cold).

A ``Database`` hands out one connection per thread, each opened by the connection factory.
Opening migrates forward by default (idempotent); a database newer than the code is refused.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from memory_core.db import migrations
from memory_core.db.sqlite import Connection, connect
from memory_core.errors import StoreError
from memory_core.settings import Settings


class Database:
    """One SQLite file of a known kind (``state`` or ``ops``)."""

    def __init__(self, path: Path, kind: str, *, busy_timeout_ms: int = 5000,
                 readonly: bool = False, autocheckpoint: bool = True, mmap_mb: int = 0) -> None:
        if kind not in migrations.MIGRATIONS:
            raise ValueError(f"unknown database kind {kind!r}")
        self.path = Path(path)
        self.kind = kind
        self.busy_timeout_ms = busy_timeout_ms
        self.readonly = readonly
        self.autocheckpoint = autocheckpoint  # see ``sqlite.connect``
        self.mmap_mb = mmap_mb
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()

    def connect(self) -> Connection:
        """A new connection with the factory's pragmas (the caller closes it)."""
        return connect(self.path, busy_timeout_ms=self.busy_timeout_ms, readonly=self.readonly,
                       autocheckpoint=self.autocheckpoint, mmap_mb=self.mmap_mb)

    @property
    def conn(self) -> Connection:
        """This thread's connection, opened on first use."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.connect()
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def migrate(self) -> list[migrations.Migration]:
        """Apply pending migrations (idempotent). Returns what was applied."""
        conn = connect(self.path, busy_timeout_ms=self.busy_timeout_ms)
        try:
            return migrations.migrate(conn, self.kind, str(self.path))
        finally:
            conn.close()

    def version(self) -> int:
        return migrations.check_version(self.conn, self.kind, str(self.path))

    def require_current(self) -> None:
        """Raise unless the schema is exactly the one this code knows."""
        version = self.version()
        latest = migrations.latest_version(self.kind)
        if version < latest:
            raise StoreError(
                f"{self.path} has schema version {version}, this mnemo needs {latest}: "
                "run `mnemo db migrate`"
            )

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Database({self.kind}, {self.path})"


def open_state(settings: Settings, *, migrate: bool = True, readonly: bool = False) -> Database:
    """The state database; migrated forward unless ``migrate=False``."""
    return _open(settings.state_db_path, "state", settings, migrate=migrate, readonly=readonly)


def open_ops(settings: Settings, *, migrate: bool = True) -> Database:
    """The ops database; migrated forward unless ``migrate=False``."""
    return _open(settings.ops_db_path, "ops", settings, migrate=migrate, readonly=False)


def _open(path: Path, kind: str, settings: Settings, *, migrate: bool,
          readonly: bool) -> Database:
    db = Database(path, kind, busy_timeout_ms=settings.busy_timeout_ms, readonly=readonly,
                  mmap_mb=settings.sqlite_mmap_mb)
    if migrate:
        db.migrate()
    db.require_current()
    return db
