"""The one place that opens SQLite.

Every connection gets WAL, ``busy_timeout``, ``foreign_keys``, ``synchronous=NORMAL``, the
sqlite-vec extension and the full-text triggers' functions (``db.fts``), and FTS5 is
checked. mnemo's own extension (``db/bm25.c``: keyword ranking in C) is loaded too when the
install built it (``bm25_extension``); without it recall ranks in Python, with the same
results. The stdlib ``sqlite3`` of many Python builds cannot load extensions; ``pysqlite3``
(from ``pysqlite3-binary``) can, so the factory picks the first module that can and fails at
open, saying what is missing and how to fix it, when none can.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import itertools
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

import structlog

from memory_core.db import fts as fts_index
from memory_core.db.dialect import is_postgres
from memory_core.db.faults import store_error
from memory_core.db.writer_lock import forget, writer_lock
from memory_core.errors import StoreError

# The type of every connection the factory opens. At run time it is the chosen module's
# class (pysqlite3's has the stdlib's API), so this names the API, not the class.
Connection = sqlite3.Connection

log = structlog.get_logger(__name__)

_INSTALL_HINT = (
    "install a SQLite module that can load extensions: `pip install pysqlite3-binary` "
    "(Linux), or use a Python whose sqlite3 was built with extension loading"
)

_module_lock = threading.Lock()
_module: ModuleType | None = None


def _can_load_extensions(mod: ModuleType) -> bool:
    conn = mod.connect(":memory:")
    try:
        return hasattr(conn, "enable_load_extension")
    finally:
        conn.close()


def sqlite_module() -> ModuleType:
    """The DB-API module used for every connection (pysqlite3 preferred when present)."""
    global _module
    with _module_lock:
        if _module is None:
            for name in ("pysqlite3.dbapi2", "sqlite3"):
                try:
                    mod = importlib.import_module(name)
                except ImportError:
                    continue
                if _can_load_extensions(mod):
                    _module = mod
                    break
            else:
                raise StoreError(f"no SQLite module here can load the sqlite-vec extension: "
                                 f"{_INSTALL_HINT}")
        return _module


def _sqlite_vec_path() -> str:
    """The sqlite-vec extension's file, found without importing the ``sqlite_vec`` package:
    its ``__init__`` imports numpy (0.3-0.5 s of CPU), which a command that opens a database
    and never touches a vector (the health probes) need not pay."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("the sqlite-vec package is not installed: `pip install sqlite-vec`")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def _load_sqlite_vec(conn: Connection) -> None:
    path = _sqlite_vec_path()
    try:
        conn.enable_load_extension(True)
        conn.load_extension(path)
        conn.enable_load_extension(False)
    except Exception as e:
        raise StoreError(
            f"sqlite-vec could not be loaded into SQLite ({type(e).__name__}): reinstall it with "
            f"`pip install --force-reinstall sqlite-vec`, or {_INSTALL_HINT}"
        ) from e


# mnemo's keyword ranking in C (``db/bm25.c``), built at install time when a C compiler and
# sqlite3ext.h were there: an SQLite extension, never imported as a Python module.
BM25_MODULE = "memory_core.db._bm25"
BM25_ENTRY = "sqlite3_mnemobm25_init"
# The connection attribute saying the extension is loaded on it (``recall.keyword``).
BM25_LOADED = "bm25_in_c"


@functools.cache
def bm25_extension() -> str | None:
    """The file of mnemo's bm25 extension, or None when the install did not build it (no C
    compiler or no sqlite3ext.h: the build is optional)."""
    try:
        spec = importlib.util.find_spec(BM25_MODULE)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def _load_bm25(conn: Connection) -> bool:
    """Load mnemo's bm25 extension when it was built; whether it is loaded. A file that
    does not load (built for another SQLite, damaged) is told once and left out: recall
    then ranks in Python, the same results."""
    path = bm25_extension()
    loaded = False
    if path is not None:
        try:
            conn.enable_load_extension(True)
            try:
                # the entry point by name: load_extension() of the Python modules takes none
                conn.execute("SELECT load_extension(?, ?)", (path, BM25_ENTRY)).fetchall()
                loaded = True
            finally:
                conn.enable_load_extension(False)
        except Exception as e:
            _bm25_failed(path, e)
    return loaded


_bm25_warned: set[str] = set()


def _bm25_failed(path: str, exc: Exception) -> None:
    if path not in _bm25_warned:  # once per process, not per connection
        _bm25_warned.add(path)
        log.warning("bm25_extension_not_loaded", path=path, error=type(exc).__name__,
                    fallback="python")


_fts5_checked: set[int] = set()


def _check_fts5(mod: ModuleType) -> None:
    """Refuse a SQLite module without FTS5. Probed on an in-memory database: FTS5 is a
    property of the module, so a damaged file is never mistaken for a missing FTS5."""
    if id(mod) in _fts5_checked:
        return
    conn = mod.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE _mnemo_fts5_probe USING fts5(x)")
        # The indexes are contentless with deletes by rowid (db.fts): SQLite 3.43 or newer.
        conn.execute("CREATE VIRTUAL TABLE _mnemo_fts5_probe2 USING fts5(x, content='', "
                     "contentless_delete=1)")
    except mod.Error as e:
        version = getattr(mod, "sqlite_version", "?")
        raise StoreError(
            f"this SQLite ({version}) has no FTS5 full-text search with contentless_delete "
            "(SQLite 3.43 or newer), which mnemo needs: "
            f"install pysqlite3-binary (SQLite with FTS5) or {_INSTALL_HINT}"
        ) from e
    finally:
        conn.close()
    _fts5_checked.add(id(mod))


# SQLite 3.51's unix VFS can deadlock when one thread opens a file while another closes a
# WAL connection to the same file (the open holds the VFS mutex and waits for the file's
# lock mutex; the close holds that and waits for the VFS mutex: seen with two worker threads,
# both stuck for good). Opening and closing are rare and short, so this process does them one
# at a time.
_open_close = threading.Lock()


@functools.cache
def _connection_class(mod: ModuleType) -> type:
    class Connection(mod.Connection):  # type: ignore[name-defined]
        """A DB-API connection that can carry ``write_lock`` (see ``write_lock``)."""

        def close(self) -> None:
            with _open_close:
                super().close()
            done = getattr(self, "writer_queue_done", None)
            if done is not None:
                done()  # once: a weakref.finalize

    return Connection


def inserted_id(cur: sqlite3.Cursor) -> int:
    """The row id of the row an ``INSERT`` on ``cur`` just made."""
    rowid = cur.lastrowid
    if rowid is None:  # only a statement that inserted nothing leaves it unset
        raise StoreError("an INSERT made no row: this is a bug in mnemo, please report it")
    return rowid


@contextlib.contextmanager
def write_lock(conn: Connection) -> Iterator[None]:
    """Hold this process's lock on the connection's file, then the writers' queue of all
    processes, around a write (``writer_lock.WriterLock.held``).

    SQLite's busy handler sleeps at least a millisecond when another connection holds the
    write lock; threads of one process (worker threads, consumers, the lease keeper) queue on
    the in-process lock instead and wake as soon as it is free, and processes queue on an
    ``flock`` the kernel hands on at once. Each waits at most the busy timeout, then goes on
    without it (never a deadlock); SQLite's lock still guards the data. A read-only
    connection has neither.
    """
    queue = getattr(conn, "writer_queue", None)
    with queue.held(getattr(conn, "busy_timeout_s", 5.0)) if queue is not None \
            else contextlib.nullcontext():
        yield


def connect(path: Path | str, *, busy_timeout_ms: int = 5000, readonly: bool = False,
            autocheckpoint: bool = True, mmap_mb: int = 0, bm25: bool = True) -> Connection:
    """Open ``path`` with mnemo's pragmas and sqlite-vec loaded.

    The connection is in autocommit mode: use ``atomic()`` for transactions. ``readonly``
    opens with ``query_only`` (the chat process reads the state db and never writes it).
    ``autocheckpoint=False``: this connection's commits never run a WAL checkpoint (which
    copies and fsyncs pages: milliseconds); for a latency-critical writer whose process
    checkpoints in the background (the chat side's enqueuer). ``mmap_mb``: read up to that
    much of the file through a memory map (no system call per page read). ``bm25``: load
    mnemo's keyword ranking in C when the install built it (``MNEMO_SQLITE_BM25``; off or
    not built: in Python, the same results). Raises StoreError
    naming the file and the fix when it cannot be opened.
    """
    mod = sqlite_module()
    _check_fts5(mod)
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _open_close:
            conn = mod.connect(
                str(path), timeout=busy_timeout_ms / 1000, isolation_level=None,
                check_same_thread=False, factory=_connection_class(mod),
            )
        if not readonly:
            conn.writer_queue = writer_lock(path)
            conn.writer_queue_done = weakref.finalize(conn, forget, conn.writer_queue)
            conn.busy_timeout_s = busy_timeout_ms / 1000
    except (OSError, mod.Error) as e:
        raise StoreError(
            f"cannot open SQLite database {path} ({type(e).__name__}): check that the folder "
            "exists and is writable, or set MNEMO_DATA_DIR"
        ) from e
    try:
        _load_sqlite_vec(conn)
        setattr(conn, BM25_LOADED, bm25 and _load_bm25(conn))  # read by recall.keyword
        fts_index.register(conn)  # the full-text triggers call it
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{path} could not switch to WAL mode (got {mode}): put the data "
                             "directory on a local file system")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if readonly:
            conn.execute("PRAGMA query_only = ON")
        if not autocheckpoint:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        if mmap_mb > 0:
            conn.execute(f"PRAGMA mmap_size = {int(mmap_mb) * 2**20}")
    except mod.Error as e:
        conn.close()
        raise _open_error(e, path) from e
    except BaseException:
        conn.close()
        raise
    return conn


def _open_error(exc: Exception, path: Path) -> StoreError:
    """What a failed open means: read-only, full, or damaged (``store_error`` examines the
    file and runs ``quick_check`` when the error itself does not say), never the install
    hint."""
    return store_error(exc, path, "opening it")


_savepoint_ids = itertools.count()


@contextlib.contextmanager
def read_snapshot(conn: Connection) -> Iterator[Connection]:
    """One read transaction around a reader's statements (a recall's ~40-270): every one
    sees the same state of the store, where a worker's commit between two of them would
    otherwise show half of its work, and none takes a snapshot of its own (~0.1-0.2 ms of a
    recall at 100k memories). Inside a transaction already, or on the Postgres primary
    (autocommit; each statement sees what is committed), it adds nothing. Writes nothing,
    so ending it never loses anything."""
    if conn.in_transaction or is_postgres(conn):
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:  # an error may have ended it already
            conn.execute("ROLLBACK")


@contextlib.contextmanager
def atomic(conn: Connection, *, immediate: bool = True,
           tenants: Iterable[str] | None = None) -> Iterator[Connection]:
    """A transaction, or a savepoint when one is already open.

    The outermost level uses ``BEGIN IMMEDIATE`` (takes the write lock up front, so a
    transaction never fails half-way on a lock upgrade). A rollback never hides the error
    that caused it. Do no I/O (embedding, network) inside: compute first, then write.

    ``tenants``: the only tenants the transaction writes. SQLite has one write lock per file
    whatever it says; the Postgres primary then locks just those tenants (``pg_state``), so
    writers of other tenants go on in parallel. Without it the write locks the whole store.
    A savepoint inside may name only tenants the transaction already holds.
    """
    if conn.in_transaction:
        if tenants is not None and hasattr(conn, "require_held"):
            conn.require_held(tenants)
        name = f"sp_{next(_savepoint_ids)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
            raise
        else:
            conn.execute(f"RELEASE {name}")
        return
    with write_lock(conn) if immediate else contextlib.nullcontext():
        begin_write = getattr(conn, "begin_write", None)  # the Postgres primary's
        if immediate and begin_write is not None:
            begin_write(tenants)
        else:
            conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")
