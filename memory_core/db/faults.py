"""Storage faults: what a SQLite error means, the StoreError that says so, and a probe.

Four states a database file can be in (``StorageStatus.state``):

- ``ok``: it opens, passes ``PRAGMA quick_check`` and can be written;
- ``readonly``: the file, its folder or its mount cannot be written (SQLITE_READONLY);
- ``full``: the file system holding it has less than ``min_free_bytes`` free (SQLITE_FULL);
- ``damaged``: it is not a SQLite database or fails ``quick_check`` (SQLITE_CORRUPT, NOTADB);

plus ``missing`` (the file does not exist yet). ``storage_status(settings)`` returns one
``StorageStatus`` per database; the worker's ``StorageGuard`` pauses on anything but ``ok``
and `mnemo health` reports it. ``store_error`` turns a driver error into the StoreError
subclass whose message names the file and the fix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memory_core.errors import StoreDamagedError, StoreError, StoreUnwritableError
from memory_core.settings import Settings

OK, READONLY, FULL, DAMAGED, MISSING = "ok", "readonly", "full", "damaged", "missing"

# SQLite's primary result codes (extended codes share the prefix: SQLITE_READONLY_DBMOVED).
_CODES = {"SQLITE_READONLY": READONLY, "SQLITE_FULL": FULL, "SQLITE_CORRUPT": DAMAGED,
          "SQLITE_NOTADB": DAMAGED}
# The same faults by message, for errors raised without a code (older drivers, wrappers).
_TEXTS = {"readonly database": READONLY, "disk is full": FULL, "disk image is malformed": DAMAGED,
          "file is not a database": DAMAGED}

DEFAULT_MIN_FREE_BYTES = 1 << 20  # below this a write may fail half-way: pause before it does

RESTORE_FIX = ("restore it from a backup (`mnemo restore latest --to DIR`, then point "
               "MNEMO_DATA_DIR at DIR), or stop mnemo and move the file aside to start it empty")
_WRITABLE_FIX = ("make the file, its -wal and -shm files, its folder and the mount writable for "
                 "the user running mnemo")
_MISSING_FIX = "start the workers or run `mnemo db migrate`, or check MNEMO_DATA_DIR"


def fix_for(state: str, path: Path | str) -> str:
    """The one fix for a database at ``path`` in ``state``: what the CLI's Error: line, the
    worker's ``storage_paused`` line and `mnemo health` all say."""
    if state == DAMAGED:
        return RESTORE_FIX
    if state == READONLY:
        return _WRITABLE_FIX
    if state == FULL:
        return f"free space on the file system holding {Path(path).parent}; what was stored is kept"
    if state == MISSING:
        return _MISSING_FIX
    return "run `mnemo health`"


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then what caused it, each once (a cycle of causes ends the walk)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _code_in(exc: BaseException, codes: Iterable[str]) -> str | None:
    """The first of ``codes`` that ``exc``'s SQLite error name is, or is an extended code of."""
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        for code in codes:
            if name == code or name.startswith(code + "_"):
                return code
    return None


def fault_of(exc: BaseException | None) -> str | None:
    """``readonly``, ``full`` or ``damaged`` when ``exc`` (or what caused it) is that storage
    fault; None for any other error (a bug, a lock timeout, bad input)."""
    for e in _chain(exc):
        if isinstance(e, StoreDamagedError):
            return DAMAGED
        if isinstance(e, StoreUnwritableError):
            return e.fault
        code = _code_in(e, _CODES)
        if code is not None:
            return _CODES[code]
        text = str(e)
        for needle, fault in _TEXTS.items():
            if needle in text:
                return fault
    return None


_IO_CODES = ("SQLITE_IOERR", "SQLITE_CANTOPEN")
_IO_TEXTS = ("disk I/O error", "unable to open database file")


def io_fault(exc: BaseException | None) -> bool:
    """True when ``exc`` (or what caused it) is a SQLite I/O error that names no fault
    (SQLITE_IOERR*, SQLITE_CANTOPEN): the file may be unwritable or gone, a probe can tell.
    A write the kernel refuses on an already open file (EPERM on an immutable file, EIO)
    is SQLITE_IOERR_WRITE, not SQLITE_READONLY."""
    return any(_code_in(e, _IO_CODES) is not None or any(t in str(e) for t in _IO_TEXTS)
               for e in _chain(exc))


def store_error(exc: BaseException, path: Path | str, doing: str) -> StoreError:
    """The StoreError for a driver error ``exc`` met while ``doing`` something to ``path``.

    The caller raises it ``from exc``. When the error does not say which fault it is (a
    "disk I/O error", "unable to open database file"), the file is examined: a read-only
    mount or file, a file system with almost no free space, then ``quick_check``. Damaged:
    StoreDamagedError (restore or move aside); read-only or full: StoreUnwritableError;
    anything else: a plain StoreError.
    """
    detail = f"{type(exc).__name__}: {exc}"
    fault = fault_of(exc)
    if fault is None:
        fault, found = _examine(Path(path))
        detail = f"{found}; {detail}" if found else detail
    if fault == DAMAGED:
        return StoreDamagedError(f"{path} is damaged ({detail}) while {doing}: "
                                 f"{fix_for(DAMAGED, path)}")
    if fault == READONLY:
        return StoreUnwritableError(READONLY, f"{path} cannot be written ({detail}) while "
                                    f"{doing}: {fix_for(READONLY, path)}")
    if fault == FULL:
        return StoreUnwritableError(FULL, f"{path} cannot be written, the disk is full "
                                    f"({detail}) while {doing}: {fix_for(FULL, path)}")
    return StoreError(f"cannot use SQLite database {path} ({detail}) while {doing}: check "
                      "that it is a mnemo database, then run `mnemo health`")


def _examine(path: Path) -> tuple[str | None, str]:
    """(fault, what was found) for a file behind an error that named no fault."""
    if not path.is_file():
        return None, ""
    reason = unwritable_reason(path)
    if reason is not None:
        return READONLY, reason
    free = free_bytes(path)
    if free < DEFAULT_MIN_FREE_BYTES:
        return FULL, f"{free} bytes free on its file system"
    problem = quick_check(path)
    if problem is not None:
        return DAMAGED, f"PRAGMA quick_check: {problem}"
    return None, ""


def free_bytes(path: Path | str) -> int:
    """Bytes an unprivileged writer may still use on the file system holding ``path``."""
    fs = os.statvfs(Path(path).parent)
    return fs.f_bavail * fs.f_frsize


def quick_check(path: Path | str) -> str | None:
    """None when ``path`` passes ``PRAGMA quick_check``; else what is wrong (first problem).

    Opens its own plain connection (no extension, no pragma that writes), so it also works
    on a file the connection factory refuses. Only SQLite's own verdict counts as damage (a
    failed check, SQLITE_CORRUPT, SQLITE_NOTADB); a file it cannot open or read for another
    reason (CANTOPEN on a read-only mount, IOERR on a full disk) is not judged here: None.
    """
    from memory_core.db.sqlite import sqlite_module  # the factory's module, lazily

    mod = sqlite_module()
    try:
        conn = mod.connect(f"file:{Path(path)}?mode=ro", uri=True, isolation_level=None)
    except mod.Error as e:
        return f"{type(e).__name__}: {e}" if fault_of(e) == DAMAGED else None
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except mod.Error as e:
        return f"{type(e).__name__}: {e}" if fault_of(e) == DAMAGED else None
    finally:
        conn.close()
    first = str(rows[0][0]) if rows else "no answer"
    return None if first == "ok" else first


@dataclass(frozen=True)
class StorageStatus:
    """One database's state (``ok``, ``readonly``, ``full``, ``damaged``, ``missing``)."""

    kind: str
    path: Path
    state: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state == OK

    @property
    def fix(self) -> str:
        return fix_for(self.state, self.path)


def probe(path: Path | str, kind: str, *,
          min_free_bytes: int = DEFAULT_MIN_FREE_BYTES) -> StorageStatus:
    """The state of one database file, without writing to it.

    Read-only: the mount is read-only, or the file or folder is not writable for this user,
    or SQLite refuses a write lock on it. Full: the file system has less than
    ``min_free_bytes`` free. Damaged: ``quick_check`` fails. Costs a quick_check (reads the
    whole file): call it on start and while paused, not per message.
    """
    path = Path(path)
    if not path.exists():
        return StorageStatus(kind, path, MISSING, "the file does not exist")
    problem = quick_check(path)
    if problem is not None:
        return StorageStatus(kind, path, DAMAGED, problem)
    reason = unwritable_reason(path)
    if reason is not None:
        return StorageStatus(kind, path, READONLY, reason)
    refused = _write_lock_refused(path)
    if refused is not None:
        return StorageStatus(kind, path, READONLY, refused)
    free = free_bytes(path)
    if free < min_free_bytes:
        return StorageStatus(kind, path, FULL, f"{free} bytes free on its file system")
    return StorageStatus(kind, path, OK)


def unwritable_reason(path: Path | str) -> str | None:
    """Why this process cannot write ``path`` (read-only mount, file or folder), or None."""
    path = Path(path)
    if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
        return "the file system is mounted read-only"
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return "the file or its folder is not writable"
    return None


def _write_lock_refused(path: Path) -> str | None:
    """Take and drop SQLite's write lock (``BEGIN IMMEDIATE``; nothing is written)."""
    from memory_core.db.sqlite import sqlite_module

    mod = sqlite_module()
    try:
        conn = mod.connect(str(path), timeout=1.0, isolation_level=None)
    except mod.Error as e:
        return f"{type(e).__name__}: {e}"
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except mod.Error as e:
        if fault_of(e) == READONLY:
            return f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return None  # a busy lock is not a fault: another process is writing


def storage_status(settings: Settings, *,
                   min_free_bytes: int = DEFAULT_MIN_FREE_BYTES) -> dict[str, StorageStatus]:
    """``{"state": StorageStatus, "ops": StorageStatus}`` for the configured data dir.

    What the worker's StorageGuard and `mnemo health` read.
    """
    # The Postgres primary is no file of this host: its server's trouble is a connection
    # error of the message that met it (retried), not a paused worker.
    kinds = ("ops",) if settings.state_backend == "postgres" else ("state", "ops")
    return {kind: probe(getattr(settings, f"{kind}_db_path"), kind,
                        min_free_bytes=min_free_bytes)
            for kind in kinds}
