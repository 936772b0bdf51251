"""The two databases: ``memory_state.db`` (hot) and ``memory_ops.db`` (cold).

A ``Database`` hands out one connection per thread, each opened by the connection factory.
Opening migrates forward by default (idempotent); a database newer than the code is refused.
``migrate_stores`` is what `mnemo db migrate` and the workers run at start; the chat process
opens with ``migrate=False``, which only checks: a missing file is refused without being
created, and a schema behind this code is refused untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.db.per_thread import ThreadConnections
from memory_core.db.sqlite import Connection, connect
from memory_core.errors import StoreError
from memory_core.settings import Settings

if TYPE_CHECKING:
    from memory_core.db import migrations

KINDS = ("state", "ops")

# Bumped by ``reopen_connections``: each thread's connection is reopened at its next use.
_generation = 0


def reopen_connections() -> None:
    """Have every ``Database`` of this process open a new connection for each thread at
    that thread's next use outside a transaction. The old one is closed by that thread as
    soon as no caller holds it any more (it stayed open until the ``Database`` closed: one
    file descriptor per thread and fault, a leak in a long-lived worker).

    SQLite opens a file it cannot write read-only, silently, and such a connection stays
    read-only after the file is writable again: a worker's StorageGuard calls this when it
    resumes, so connections opened during the fault (a heartbeat's, a worker thread's
    first) do not keep failing.
    """
    global _generation
    _generation += 1


def _current_generation() -> int:
    return _generation


_MIGRATE_FIX = ("run `mnemo db migrate`, or start the workers (`mnemo worker` / `mnemo up`), "
                "which migrate both databases on start")


def _migrations() -> Any:
    """``memory_core.db.migrations``, imported on first use: it loads SQLAlchemy (the schema
    is written with its Core), a quarter of a second that `mnemo --help` need not pay."""
    from memory_core.db import migrations

    return migrations


class Database:
    """One SQLite file of a known kind (``state`` or ``ops``)."""

    def __init__(self, path: Path, kind: str, *, busy_timeout_ms: int = 5000,
                 readonly: bool = False, autocheckpoint: bool = True, mmap_mb: int = 0,
                 bm25: bool = True) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown database kind {kind!r}")
        self.path = Path(path)
        self.kind = kind
        self.busy_timeout_ms = busy_timeout_ms
        self.readonly = readonly
        self.autocheckpoint = autocheckpoint  # see ``sqlite.connect``
        self.mmap_mb = mmap_mb
        self.bm25 = bm25  # see ``sqlite.connect``
        self._conns: ThreadConnections[Connection] = ThreadConnections(
            self.connect, generation=_current_generation)

    def connect(self) -> Connection:
        """A new connection with the factory's pragmas (the caller closes it)."""
        return connect(self.path, busy_timeout_ms=self.busy_timeout_ms, readonly=self.readonly,
                       autocheckpoint=self.autocheckpoint, mmap_mb=self.mmap_mb,
                       bm25=self.bm25)

    @property
    def conn(self) -> Connection:
        """This thread's connection, opened on first use."""
        return self._conns.get()

    def migrate(self) -> list[migrations.Migration]:
        """Apply pending migrations (idempotent). Returns what was applied."""
        conn = connect(self.path, busy_timeout_ms=self.busy_timeout_ms)
        try:
            return _migrations().migrate(conn, self.kind, str(self.path))
        finally:
            conn.close()

    def version(self) -> int:
        return _migrations().check_version(self.conn, self.kind, str(self.path))

    def require_current(self) -> None:
        """Raise unless the file exists and its schema is exactly the one this code knows.

        Existence is checked before any connection, so a missing file is refused, not created.
        Raises StoreError (missing, behind: the fix is `mnemo db migrate`) or
        SchemaTooNewError (newer than this code).
        """
        if not self.path.exists():
            raise StoreError(f"{self.path} (the {self.kind} database) does not exist: "
                             f"{_MIGRATE_FIX}; or check MNEMO_DATA_DIR")
        version = self.version()
        latest = _migrations().latest_version(self.kind)
        if version < latest:
            raise StoreError(f"{self.path} has schema version {version}, this mnemo needs "
                             f"{latest}: {_MIGRATE_FIX}")

    def close(self) -> None:
        self._conns.close()

    def __repr__(self) -> str:
        return f"Database({self.kind}, {self.path})"


def open_state(settings: Settings, *, migrate: bool = True, readonly: bool = False,
               autocheckpoint: bool = True) -> Any:
    """The state database (a ``Database``, or the Postgres primary's ``PgDatabase`` when
    ``MNEMO_STATE_BACKEND=postgres``); migrated forward unless ``migrate=False``.

    ``migrate=False`` only checks (``Database.require_current``): a missing or older file
    is refused with the fix, and neither created nor changed. ``autocheckpoint=False``: see
    ``sqlite.connect`` (the workers, whose ``WalCheckpointer`` checkpoints instead).
    A backend other than the one the memory was switched to (``mnemo mirror promote``) is
    refused (``primary.check_backend``).
    """
    from memory_core.db import primary

    if settings.state_backend == "postgres":
        return primary.open_primary(settings, migrate=migrate, readonly=readonly)
    db = _open(settings.state_db_path, "state", settings, migrate=migrate, readonly=readonly,
               autocheckpoint=autocheckpoint)
    try:
        primary.refuse_if_promoted(db.conn, settings)
    except BaseException:
        db.close()
        raise
    return db


def open_ops(settings: Settings, *, migrate: bool = True,
             autocheckpoint: bool = True) -> Database:
    """The ops database; migrated forward unless ``migrate=False`` (then as ``open_state``).

    ``autocheckpoint=False``: see ``sqlite.connect`` (the chat side's writers).
    """
    return _open(settings.ops_db_path, "ops", settings, migrate=migrate, readonly=False,
                 autocheckpoint=autocheckpoint)


@dataclass(frozen=True)
class Migrated:
    """One database after ``migrate_stores``: where it is (a file's path, or the primary's
    canonical URL and schema), its version and what was applied now."""

    kind: str
    where: str
    version: int
    applied: tuple[migrations.Migration, ...]


def migrate_stores(settings: Settings) -> list[Migrated]:
    """Create or upgrade both databases to this code's schema (idempotent).

    What `mnemo db migrate` runs, and the workers at start (the chat process never does).
    Raises SchemaTooNewError for a newer database (left untouched), StoreError when
    a file cannot be opened or is of the other kind.
    """
    done: list[Migrated] = []
    kinds: tuple[str, ...] = ("state", "ops")
    if settings.state_backend == "postgres":
        from memory_core.db import primary

        done.append(primary.migrate_primary(settings))
        kinds = ("ops",)
    for kind in kinds:
        db = Database(getattr(settings, f"{kind}_db_path"), kind,
                      busy_timeout_ms=settings.busy_timeout_ms)
        try:
            applied = db.migrate()
            db.require_current()
            done.append(Migrated(kind, str(db.path), db.version(), tuple(applied)))
        finally:
            db.close()
    return done


def _open(path: Path, kind: str, settings: Settings, *, migrate: bool, readonly: bool,
          autocheckpoint: bool = True) -> Database:
    db = Database(path, kind, busy_timeout_ms=settings.busy_timeout_ms, readonly=readonly,
                  autocheckpoint=autocheckpoint, mmap_mb=settings.sqlite_mmap_mb,
                  bm25=settings.sqlite_bm25)
    try:
        if migrate:
            db.migrate()
        db.require_current()
    except BaseException:
        db.close()  # a refused file is left as found: no connection kept open on it
        raise
    return db
