"""The backups folder: names, the lock, manifests, checksums, listing and retention.

Layout of ``MNEMO_BACKUP_DIR`` (default ``<MNEMO_DATA_DIR>/backups``)::

    20261201T060000Z-3f2a9c1e/       a complete backup: it has manifest.json
        manifest.json                sha256 and size of every file, row counts, versions
        memory_state.db  memory_ops.db
        exports/<tenant>/...         JSONL and GraphML, per tenant
        postgres.dump                only when a Postgres mirror is configured
    .tmp-<name>-<id>/                a backup being written (renamed into place when complete)
    .del-<name>/                     a backup being deleted (renamed out of sight first)
    .drill-<id>/                     a restore drill's scratch folder
    .lock                            flock: one backup or drill at a time; restores share it

A folder only gets its final name, by one atomic rename, once every file and the manifest
are written and synced, so a crash never leaves a folder that looks complete. Whatever
starts with a dot is in-flight work; the lock holder removes what a crash left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_core.clock import ensure_utc
from memory_core.db.sqlite import Connection
from memory_core.errors import MnemoError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
DB_FILES = {"state": "memory_state.db", "ops": "memory_ops.db"}
_LOCK = ".lock"
_CHUNK = 1 << 20


class BackupError(MnemoError):
    """A backup could not be made, read or restored (the message names the folder and fix)."""


class BackupBusyError(BackupError):
    """Another backup or drill holds the backups folder's lock (retry later)."""


class BackupCorruptError(BackupError):
    """A backup's files do not match its manifest."""


class RestoreRefusedError(BackupError):
    """A restore would overwrite files without the caller's confirmation."""


@dataclass(frozen=True)
class BackupInfo:
    """A complete backup on disk."""

    name: str
    path: Path
    manifest: dict[str, Any]

    @property
    def created_at(self) -> str:
        return str(self.manifest.get("created_at", ""))

    @property
    def window(self) -> str:
        return str(self.manifest.get("window", ""))

    @property
    def size_bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.manifest.get("files", {}).values())


def backup_name(now: datetime, window: str) -> str:
    """``YYYYmmddTHHMMSSZ-<8 hex of the window>``: sorts by time, unique per window."""
    stamp = ensure_utc(now).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{hashlib.sha256(window.encode()).hexdigest()[:8]}"


@contextlib.contextmanager
def folder_lock(root: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold the backups folder's lock: exclusive for a backup or drill, shared for a restore.

    ``flock`` is released by the kernel when the process dies, so a killed backup never
    leaves the folder locked. Never waits: raises BackupBusyError when it is held.
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise BackupError(f"cannot use the backups folder {root} ({type(e).__name__}: "
                          f"{e.strerror}): check its permissions, or set MNEMO_BACKUP_DIR") from e
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupBusyError(
                f"another backup or restore drill is running in {root} (its lock is held): "
                "try again when it has finished") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def clean_leftovers(root: Path) -> int:
    """Remove the in-flight folders a crash left behind (call with the exclusive lock)."""
    removed = 0
    for entry in root.iterdir() if root.exists() else ():
        if entry.is_dir() and entry.name.startswith((".tmp-", ".del-", ".drill-")):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def sha256_file(path: Path, *, sync: bool = False,
                on_bytes: Callable[[int], object] | None = None) -> tuple[str, int]:
    """The file's sha256 and size, read in chunks; ``sync`` also flushes it to disk.
    ``on_bytes(n)`` after each chunk of ``n`` bytes read."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
        if sync:
            os.fsync(f.fileno())
    return digest.hexdigest(), size


def sync_dir(path: Path) -> None:
    """Make a rename or new entry in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    path = folder / MANIFEST
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a backup folder; BackupError when it is missing or unreadable."""
    path = folder / MANIFEST
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise BackupError(f"{folder} is not a complete mnemo backup (no {MANIFEST}): pick "
                          "one listed by `mnemo backup list`") from None
    except (OSError, ValueError) as e:
        raise BackupCorruptError(f"{path} cannot be read ({type(e).__name__}): the backup is "
                                 "damaged; use another one (`mnemo backup list`)") from e
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise BackupError(f"{path} is not a manifest this mnemo can read (format "
                          f"{MANIFEST_FORMAT} expected): restore it with the mnemo that made it")
    return manifest


def list_backups(root: Path) -> list[BackupInfo]:
    """Complete backups, oldest first (by creation time, then name)."""
    found = []
    for entry in root.iterdir() if root.exists() else ():
        if entry.name.startswith(".") or not (entry / MANIFEST).is_file():
            continue
        try:
            found.append(BackupInfo(entry.name, entry, read_manifest(entry)))
        except BackupError:
            continue  # unreadable: not a backup we can use or should count
    return sorted(found, key=lambda b: (b.created_at, b.name))


def find_backup(root: Path, ref: str) -> BackupInfo:
    """A backup by name in ``root``, ``latest``, or a path to a backup folder."""
    if ref == "latest":
        backups = list_backups(root)
        if not backups:
            raise BackupError(f"there is no complete backup in {root}: run `mnemo backup now`")
        return backups[-1]
    path = Path(ref).expanduser()
    if not path.is_dir():
        path = root / ref
    if not path.is_dir() or ref.startswith("."):
        raise BackupError(f"no backup named {ref!r} in {root}: see `mnemo backup list`, or "
                          "pass the path of a backup folder")
    return BackupInfo(path.name, path, read_manifest(path))


def delete_backup(root: Path, info: BackupInfo) -> None:
    """Rename out of sight first, so a crash mid-delete never leaves a half backup listed."""
    doomed = root / f".del-{info.name}"
    os.replace(info.path, doomed)
    sync_dir(root)
    shutil.rmtree(doomed, ignore_errors=True)


def manifest_text(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, sort_keys=True)


def schema_version(conn: Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def table_counts(conn: Connection) -> dict[str, int]:
    """Rows of every ordinary table (FTS5 and sqlite-vec shadow tables included; the
    virtual tables themselves are views over those and are not counted twice)."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")]
    return {name: int(conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
            for name in names}
