"""The ``backup`` job: both databases, per-tenant exports, a manifest, retention.

On the Postgres primary the state database is a logical dump of its schema taken from one
``REPEATABLE READ`` snapshot (``pg_backup``); the rest is the same. Otherwise: each
database is copied with SQLite's backup API, a few pages per step, from a
connection that holds one read transaction for the whole copy. In WAL mode that read
transaction blocks no one (the chat process reads, workers write on), and it pins the
snapshot, so the copy is consistent and never restarts however busy the writers are (a
paged backup without it starts over after every foreign write). The exports are then read
from those copies, not from the live files.

The folder is written under a temporary name and renamed into place when complete (see
``backup_files``). Idempotent per window: a window that already has a complete backup is
not backed up again. The manifest is also recorded in ``backup_manifests`` (memory_ops.db).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog

from memory_core.clock import to_db
from memory_core.db.meta import get_metas
from memory_core.db.sqlite import Connection, atomic, connect, inserted_id, sqlite_module
from memory_core.db.stores import Database
from memory_core.maintenance import backup_files as files
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.common import tenants
from memory_core.maintenance.exports import export_tenant
from memory_core.maintenance.mirror_drift import check_mirrors
from memory_core.maintenance.pg_dump import DUMP_FILE, dump_postgres
from memory_core.progress import Counter, OnProgress, no_progress
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.maintenance")

PAGES_PER_STEP = 1024  # 4 MiB a step: the source's lock is only taken per step
# meta keys memory_core.vectors writes: which embedder built the vectors in this copy
_EMBEDDER_KEYS = ("embedder_identity", "embedder_dim", "vector_generation")

Progress = Callable[[int, int, int], object]


def backup(env: JobEnv, on_progress: OnProgress = no_progress) -> JobReport:
    """Back up both databases into a new folder (once per window), then apply retention.

    ``on_progress(phase, done, total)``: bytes copied per database file (phase: its file
    name), then tenants exported (``exports``), then bytes checksummed (``checksums``)."""
    root = env.settings.backups_path
    report = JobReport("backup")
    with files.folder_lock(root):
        done = [b for b in files.list_backups(root) if b.window == env.window]
        if done:
            info = done[-1]
            record_manifest(env.ops, info)  # a crash may have come between rename and record
            report.counts.update(existing=1, backup=info.name)
            return report
        files.clean_leftovers(root)
        info = _make(env, root, on_progress)
        record_manifest(env.ops, info)
        deleted = apply_retention(env.ops, root, env.settings.backup_keep)
    report.counts.update(_summary(info), existing=0, deleted=deleted)
    drift = check_mirrors(env)
    if drift:
        report.counts.update({f"mirror_drift_{sink}": n for sink, n in drift.items()})
    log.info("backup_done", **{k: v for k, v in report.counts.items() if k != "existing"})
    return report


def _summary(info: files.BackupInfo) -> dict[str, int | str]:
    exports = info.manifest["exports"]
    totals = {key: sum(t[key] for t in exports.values())
              for key in ("beliefs", "episodes", "entity_merges", "audit_log")}
    return {"backup": info.name, "bytes": info.size_bytes, "tenants": len(exports),
            "postgres_dump": info.manifest["postgres"]["status"], **totals}


def _make(env: JobEnv, root: Path, on_progress: OnProgress) -> files.BackupInfo:
    name = files.backup_name(env.now, env.window)
    tmp = root / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        began = time.monotonic()
        manifest = _fill(env, tmp, on_progress)
        manifest.update(name=name, duration_ms=int((time.monotonic() - began) * 1000))
        files.write_manifest(tmp, manifest)
        for folder in sorted({p.parent for p in tmp.rglob("*")}, reverse=True):
            files.sync_dir(folder)
        final = root / name
        if final.exists():
            raise files.BackupError(f"{final} exists but is not a backup of window "
                                    f"{env.window}: move it away and run the backup again")
        os.replace(tmp, final)
        files.sync_dir(root)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise files.BackupError(
            f"writing backup {name} into {root} failed ({type(e).__name__}: {e.strerror}): "
            "check the free space and permissions of MNEMO_BACKUP_DIR; nothing was kept") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return files.BackupInfo(name, final, manifest)


def _fill(env: JobEnv, tmp: Path, on_progress: OnProgress) -> dict[str, Any]:
    """Write every file of the backup into ``tmp``; the manifest (without its name)."""
    databases: dict[str, Any] = {}
    with _state_snapshot(env, tmp, on_progress) as (state, databases["state"]), \
            snapshot(env.ops, tmp / files.DB_FILES["ops"],
                     progress=_bytes_copied(env.ops, files.DB_FILES["ops"], on_progress)
                     ) as ops:
        forget_processes(ops)
        databases["ops"] = {"file": files.DB_FILES["ops"],
                            "schema_version": files.schema_version(ops),
                            "tables": files.table_counts(ops)}
        databases["state"]["embedder"] = _embedder(state)
        names = list(tenants(state))
        exports = {}
        for tenant in names:
            exports[tenant] = export_tenant(state, ops, tenant, tmp / "exports" / tenant)
            on_progress("exports", len(exports), len(names))
    postgres = _postgres(env.settings, tmp)
    listed = {}
    paths = sorted(p for p in tmp.rglob("*") if p.is_file())
    read = Counter(on_progress, "checksums", sum(p.stat().st_size for p in paths))
    for path in paths:
        sha, size = files.sha256_file(path, sync=True, on_bytes=read)
        listed[path.relative_to(tmp).as_posix()] = {"sha256": sha, "bytes": size}
    return {"format": files.MANIFEST_FORMAT, "window": env.window,
            "created_at": to_db(env.now), "mnemo_version": _version(),
            "databases": databases, "exports": exports, "postgres": postgres,
            "files": listed}


@contextlib.contextmanager
def _state_snapshot(env: JobEnv, tmp: Path, on_progress: OnProgress
                    ) -> Iterator[tuple[Connection, dict[str, Any]]]:
    """The state database copied into ``tmp``: a connection reading the copy's state (the
    exports read it) and its manifest entry. The SQLite file is copied online; the Postgres
    primary is dumped table by table from one snapshot (``pg_backup``)."""
    if env.settings.state_backend == "postgres":
        from memory_core.maintenance import pg_backup

        with pg_backup.snapshot(env.state) as conn:  # type: ignore[arg-type]
            yield conn, pg_backup.dump(conn, tmp)  # type: ignore[misc]
        return
    name = files.DB_FILES["state"]
    with snapshot(env.state, tmp / name,
                  progress=_bytes_copied(env.state, name, on_progress)) as state:
        yield state, {"file": name, "schema_version": files.schema_version(state),
                      "tables": files.table_counts(state)}


def forget_processes(copy: Connection) -> None:
    """Drop the heartbeats from the copy of the ops database: they name the processes that
    were running when it was taken, and none of them runs on a restored folder. Left in, a
    restore would show them to `mnemo health` as workers that died without stopping for
    MNEMO_HEARTBEAT_KEEP_S (an hour)."""
    with atomic(copy):
        copy.execute("DELETE FROM heartbeats")


def _bytes_copied(db: Database, phase: str, on_progress: OnProgress) -> Progress:
    """SQLite's backup callback (pages left of pages) as ``on_progress`` in bytes; reports
    the start (0 bytes) at once."""
    page, pages = (int(db.conn.execute(f"PRAGMA {p}").fetchone()[0])
                   for p in ("page_size", "page_count"))
    on_progress(phase, 0, page * pages)

    def step(status: int, remaining: int, total: int) -> None:
        on_progress(phase, (total - remaining) * page, total * page)

    return step


@contextlib.contextmanager
def snapshot(db: Database, dest: Path, *, pages: int = PAGES_PER_STEP,
             progress: Progress | None = None) -> Iterator[Connection]:
    """Copy ``db`` to ``dest`` online and yield a connection to the copy.

    On exit the copy is switched to rollback-journal mode (one self-contained file, no
    ``-wal`` beside it) and closed. ``progress(status, remaining, total)`` runs after
    each step (tests use it to write between steps).
    """
    mod = sqlite_module()
    copy = connect(dest, busy_timeout_ms=db.busy_timeout_ms)
    try:
        copy.execute("PRAGMA journal_mode = DELETE")
        # Not db.connect(): a memory map would only add the whole file to this process's
        # resident set, and the copy never writes the source.
        source = connect(db.path, busy_timeout_ms=db.busy_timeout_ms, readonly=True)
        try:
            source.execute("BEGIN")  # the read transaction that pins the snapshot
            source.execute("SELECT count(*) FROM sqlite_master").fetchone()
            source.backup(copy, pages=pages, progress=progress)
            source.execute("COMMIT")
        except mod.Error as e:
            raise files.BackupError(
                f"the online backup of {db.path} failed ({type(e).__name__}: {e}): check the "
                "free space and permissions of the backups folder (MNEMO_BACKUP_DIR)") from e
        finally:
            source.close()
        copy.execute("PRAGMA journal_mode = DELETE")  # the copied header says WAL
        yield copy
    finally:
        copy.close()


def _embedder(conn: Connection) -> dict[str, str | None]:
    found = get_metas(conn, *_EMBEDDER_KEYS)
    return {key: found.get(key) for key in _EMBEDDER_KEYS}


def _postgres(settings: Settings, tmp: Path) -> dict[str, str]:
    url = settings.postgres_backend
    if settings.state_backend == "postgres":
        return {"status": "primary: dumped by mnemo itself (primary/)"}
    if url is None:
        return {"status": "skipped: no Postgres mirror configured (MNEMO_POSTGRES_URL)"}
    dump_postgres(url, settings.postgres_password, tmp / DUMP_FILE)
    return {"status": "dumped", "file": DUMP_FILE}


def _version() -> str:
    try:
        return metadata.version("mnemo")
    except metadata.PackageNotFoundError:
        return "unknown"


def record_manifest(ops: Database, info: files.BackupInfo) -> int:
    """The ``backup_manifests`` row of a backup folder, inserted once; its id."""
    conn = ops.conn
    path = str(info.path.resolve())
    with atomic(conn):
        row = conn.execute("SELECT id FROM backup_manifests WHERE path = ?", (path,)).fetchone()
        if row:
            return int(row[0])
        cur = conn.execute(
            "INSERT INTO backup_manifests (created_at, path, manifest) VALUES (?, ?, ?)",
            (info.created_at, path, files.manifest_text(info.manifest)))
        return inserted_id(cur)


def apply_retention(ops: Database, root: Path, keep: int) -> int:
    """Delete the complete backups beyond the newest ``keep`` (and their rows); how many."""
    doomed = files.list_backups(root)[:-keep]
    for info in doomed:
        path = str(info.path.resolve())
        files.delete_backup(root, info)
        with atomic(ops.conn):
            ops.conn.execute("DELETE FROM backup_manifests WHERE path = ?", (path,))
    return len(doomed)
