"""The ``restore_drill`` job: prove the latest backup restores.

It copies the latest complete backup's databases into a scratch folder (a Postgres
primary's dump: into temporary tables, ``pg_backup.check``), checks each copy's
sha256, runs ``PRAGMA integrity_check`` on it, compares its schema version and row counts
per table with the manifest, checks the other files' checksums in place, records the result
in ``restore_drills`` (memory_ops.db) and removes the scratch folder.

A failed drill is a result, not an error: it is recorded (``ok = 0`` and the failed checks),
reported and logged as a warning, and the job succeeds, because retrying would fail the
same way. Only a drill that could not run at all (the folder is locked, the ops database
cannot be written) raises. Idempotent per window: a window that has a recorded drill returns
that result. Nothing in the detail or the logs is memory text: file names, table names,
counts and check names only.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memory_core.clock import to_db
from memory_core.db.sqlite import Connection, atomic, connect, sqlite_module
from memory_core.errors import StoreError
from memory_core.maintenance import backup_files as files
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.restore import copy_file, verify

log = structlog.get_logger("mnemo.maintenance")


@dataclass
class DrillResult:
    backup: str | None
    path: str | None
    failures: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)  # databases, tables, files

    @property
    def ok(self) -> bool:
        return self.backup is not None and not self.failures


def restore_drill(env: JobEnv) -> JobReport:
    """Drill the latest backup; record and report pass or fail (never raises on a fail)."""
    primary = env.state if env.settings.state_backend == "postgres" else None
    root = env.settings.backups_path
    with files.folder_lock(root):
        prior = recorded_drill(env.ops.conn, env.window)
        if prior is not None:
            return _report(prior, existing=True)
        files.clean_leftovers(root)
        backups = files.list_backups(root)
        if backups:
            result = drill(backups[-1], root, primary)
        else:
            result = DrillResult(None, None, [f"no complete backup in {root}"])
        detail = {"window": env.window, "backup": result.backup, "ok": result.ok,
                  "failures": result.failures, "checked": result.checked}
        _record(env.ops.conn, env.now, result, detail)
    if result.ok:
        log.info("restore_drill_passed", backup=result.backup, **result.checked)
    else:
        log.warning("restore_drill_failed", backup=result.backup, failures=result.failures)
    return _report(detail, existing=False)


def drill(info: files.BackupInfo, root: Path, primary: Any = None) -> DrillResult:
    """Restore ``info`` into a scratch folder under ``root`` and check it; the scratch goes.
    A Postgres primary's dump is loaded into temporary tables of ``primary`` (its
    ``PgDatabase``) instead (``pg_backup.check``)."""
    result = DrillResult(info.name, str(info.path.resolve()))
    scratch = root / f".drill-{uuid.uuid4().hex[:8]}"
    scratch.mkdir(parents=True)
    try:
        databases = info.manifest.get("databases", {})
        for kind, expected in sorted(databases.items()):
            if expected.get("engine") == "postgres":
                _check_primary(info, primary, expected, result)
            else:
                _check_database(info, scratch, kind, expected, result)
        others = [n for n in info.manifest.get("files", {})
                  if n not in {d.get("file") for d in databases.values()}]
        result.failures.extend(verify(info, others))
        result.checked["files"] = len(others) + len(databases)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _check_database(info: files.BackupInfo, scratch: Path, kind: str, expected: dict[str, Any],
                    result: DrillResult) -> None:
    name = expected["file"]
    listed = info.manifest.get("files", {}).get(name)
    if listed is None or not (info.path / name).is_file():
        result.failures.append(f"{name}: missing from the backup")
        return
    sha, _ = copy_file(info.path / name, scratch / name)
    if sha != listed["sha256"]:
        result.failures.append(f"{name}: sha256 differs from the manifest")
    result.checked["databases"] = result.checked.get("databases", 0) + 1
    try:
        conn = connect(scratch / name)
    except StoreError:
        result.failures.append(f"{name}: cannot be opened as a SQLite database")
        return
    try:
        _check_contents(conn, name, expected, result)
    except sqlite_module().Error as e:
        result.failures.append(f"{name}: check stopped by {type(e).__name__} (damaged file)")
    finally:
        conn.close()


def _check_primary(info: files.BackupInfo, primary: Any, expected: dict[str, Any],
                   result: DrillResult) -> None:
    if primary is None:
        result.failures.append("the backup holds a Postgres primary's dump: drill it with "
                               "MNEMO_STATE_BACKEND=postgres")
        return
    from memory_core.maintenance import pg_backup

    result.failures.extend(pg_backup.check(primary, info.path, expected))
    result.checked["databases"] = result.checked.get("databases", 0) + 1
    result.checked["tables"] = result.checked.get("tables", 0) + len(expected["tables"])


def _check_contents(conn: Connection, name: str, expected: dict[str, Any],
                    result: DrillResult) -> None:
    integrity = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        result.failures.append(f"{name}: integrity_check found {len(integrity)} problem(s)")
    version = files.schema_version(conn)
    if version != expected.get("schema_version"):
        result.failures.append(f"{name}: schema version {version}, manifest says "
                               f"{expected.get('schema_version')}")
    counts = files.table_counts(conn)
    want = expected.get("tables", {})
    for table in sorted(set(counts) | set(want)):
        if counts.get(table) != want.get(table):
            result.failures.append(f"{name}: table {table} has {counts.get(table)} rows, "
                                   f"manifest says {want.get(table)}")
    result.checked["tables"] = result.checked.get("tables", 0) + len(want)


def recorded_drill(conn: Connection, window: str) -> dict[str, Any] | None:
    """The detail recorded by the drill of ``window``, if it ran."""
    row = conn.execute("SELECT detail FROM restore_drills WHERE "
                       "json_extract(detail, '$.window') = ? ORDER BY id DESC LIMIT 1",
                       (window,)).fetchone()
    return json.loads(row[0]) if row else None


def last_drill(conn: Connection, backup: str) -> dict[str, Any] | None:
    """When the latest drill of the backup named ``backup`` ran and whether it passed."""
    row = conn.execute("SELECT at, ok FROM restore_drills WHERE "
                       "json_extract(detail, '$.backup') = ? ORDER BY id DESC LIMIT 1",
                       (backup,)).fetchone()
    return {"at": row[0], "ok": bool(row[1])} if row else None


def _record(conn: Connection, now: datetime, result: DrillResult, detail: dict[str, Any]) -> None:
    with atomic(conn):
        row = (conn.execute("SELECT id FROM backup_manifests WHERE path = ?",
                            (result.path,)).fetchone() if result.path else None)
        conn.execute("INSERT INTO restore_drills (at, backup_id, ok, detail) VALUES (?, ?, ?, ?)",
                     (to_db(now), row[0] if row else None, int(result.ok),
                      json.dumps(detail, sort_keys=True)))


def _report(detail: dict[str, Any], *, existing: bool) -> JobReport:
    report = JobReport("restore_drill")
    report.counts.update(ok=int(bool(detail["ok"])), backup=detail["backup"] or "-",
                         failures=len(detail["failures"]), existing=int(existing),
                         **detail["checked"])
    return report
