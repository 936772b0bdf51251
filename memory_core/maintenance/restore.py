"""Restoring a backup's databases into a folder (and a Postgres primary's dump into an empty
primary: ``pg_backup.load``).

The checksums are verified against the manifest before anything is written; a folder that
is not empty is refused unless the caller confirms the overwrite; each file is copied under
a temporary name, synced and renamed into place, so a crash leaves either the old file or
the whole new one. A stale ``-wal``/``-shm`` beside a replaced database is removed first
(SQLite would otherwise replay the old database's log into the restored one). Stop every
mnemo process that uses the target folder before restoring into it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_core.db.migrations import latest_version
from memory_core.maintenance import backup_files as files
from memory_core.progress import Counter, OnProgress, no_progress

_CHUNK = 1 << 20


@dataclass
class RestoreResult:
    """What a restore did (or, for a dry run, would do)."""

    backup: str
    target: str
    dry_run: bool
    files: list[dict[str, Any]] = field(default_factory=list)  # name, bytes, sha256, replaces
    target_was_empty: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"backup": self.backup, "target": self.target, "dry_run": self.dry_run,
                "files": self.files, "target_was_empty": self.target_was_empty}


def copy_file(src: Path, dest: Path,
              on_bytes: Callable[[int], object] | None = None) -> tuple[str, int]:
    """Copy ``src`` to ``dest`` via a temporary name, synced; the sha256 and size written.
    ``on_bytes(n)`` after each chunk of ``n`` bytes written."""
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.restore")
    digest = hashlib.sha256()
    size = 0
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            while chunk := fin.read(_CHUNK):
                digest.update(chunk)
                fout.write(chunk)
                size += len(chunk)
                if on_bytes is not None:
                    on_bytes(len(chunk))
            fout.flush()
            os.fsync(fout.fileno())
        for suffix in ("-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dest.with_name(dest.name + suffix))
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    files.sync_dir(dest.parent)
    return digest.hexdigest(), size


def verify(info: files.BackupInfo, names: list[str],
           on_progress: OnProgress = no_progress) -> list[str]:
    """Files among ``names`` that are missing or differ from the manifest (empty: all good).
    ``on_progress("verify", bytes read, bytes listed)``."""
    problems = []
    listed = info.manifest.get("files", {})
    read = Counter(on_progress, "verify",
                   sum(int(listed[n]["bytes"]) for n in names if n in listed))
    for name in names:
        path = info.path / name
        if name not in listed:
            problems.append(f"{name}: not in the manifest")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif files.sha256_file(path, on_bytes=read)[0] != listed[name]["sha256"]:
            problems.append(f"{name}: sha256 differs from the manifest")
    return problems


def _check_versions(info: files.BackupInfo) -> None:
    for kind, db in info.manifest["databases"].items():
        if "file" in db and int(db["schema_version"]) > latest_version(kind):
            raise files.BackupError(
                f"backup {info.name} holds a {kind} database of schema version "
                f"{db['schema_version']}, newer than this mnemo knows ({latest_version(kind)}): "
                "restore it with a newer mnemo (`pip install -U mnemo`)")


def primary_entry(info: files.BackupInfo) -> dict[str, Any] | None:
    """The manifest entry of a Postgres primary's dump, when the backup holds one."""
    state = info.manifest["databases"].get("state", {})
    return state if state.get("engine") == "postgres" else None


def _dump_files(info: files.BackupInfo) -> list[str]:
    entry = primary_entry(info)
    if entry is None:
        return []
    return [n for n in info.manifest["files"] if n.startswith(f"{entry['dir']}/")]


def restore(info: files.BackupInfo, target: Path, *, overwrite: bool = False,
            dry_run: bool = False, on_progress: OnProgress = no_progress,
            primary: Any = None) -> RestoreResult:
    """Restore the backup's databases: the SQLite files into ``target``; a Postgres
    primary's dump into ``primary`` (a ``PgDatabase`` whose schema is empty).

    ``on_progress(phase, done, total)``: bytes verified (``verify``), then bytes copied
    (``copy``).

    Raises BackupCorruptError when a file does not match the manifest (nothing written),
    RestoreRefusedError when ``target`` is not empty and ``overwrite`` is not set, or the
    backup holds a primary and ``primary`` is None or not empty.
    """
    target = target.expanduser().resolve()
    if target == info.path.resolve():
        raise files.RestoreRefusedError(f"{target} is the backup itself: restore into another "
                                        "folder")
    names = [db["file"] for db in info.manifest["databases"].values() if "file" in db]
    entry = primary_entry(info)
    if entry is not None and primary is None:
        raise files.RestoreRefusedError(
            f"backup {info.name} holds a Postgres primary: run the restore with "
            "MNEMO_STATE_BACKEND=postgres and MNEMO_POSTGRES_URL naming an empty database; "
            "nothing was restored")
    with files.folder_lock(info.path.parent, shared=True):  # retention waits for us
        problems = verify(info, names + _dump_files(info), on_progress)
        if problems:
            raise files.BackupCorruptError(
                f"backup {info.name} does not match its manifest ({'; '.join(problems)}): "
                "nothing was restored; restore an older backup (`mnemo backup list`)")
        _check_versions(info)
        empty = not target.exists() or not any(target.iterdir())
        if not empty and not overwrite and not dry_run:
            raise files.RestoreRefusedError(
                f"{target} is not empty: confirm the overwrite with --yes (it replaces "
                f"{' and '.join(names)} there), or restore into an empty folder")
        result = RestoreResult(info.name, str(target), dry_run, target_was_empty=empty)
        listed = info.manifest["files"]
        for name in names:
            result.files.append({"name": name, "bytes": listed[name]["bytes"],
                                 "sha256": listed[name]["sha256"],
                                 "replaces": (target / name).exists()})
        if entry is not None:
            from memory_core.maintenance import pg_backup

            if dry_run and pg_backup.restored_from(primary) != info.path.name:
                pg_backup.refuse_occupied(primary)
            elif not dry_run:  # first: an occupied primary is refused before any file is written
                pg_backup.load(primary, info.path, entry)
            result.files.append({"name": f"{entry['dir']}/ -> {primary.url.canonical}",
                                 "bytes": sum(int(listed[n]["bytes"])
                                              for n in _dump_files(info)),
                                 "sha256": "", "replaces": False})
        if dry_run:
            return result
        target.mkdir(parents=True, exist_ok=True)
        written = Counter(on_progress, "copy", sum(int(listed[n]["bytes"]) for n in names))
        for name in names:
            sha, _ = copy_file(info.path / name, target / name, written)
            if sha != listed[name]["sha256"]:
                raise files.BackupCorruptError(
                    f"the copy of {name} into {target} does not match the manifest (a read "
                    "or disk error): check the disk and run the restore again")
    return result
