"""Backup, restore and the restore drill on the Postgres primary: the backup job dumps the
primary's schema from one snapshot; the restore loads it into an empty primary (refusing one
that is not) and the restored memory equals the original, postings and vectors included; the
drill loads every file into temporary tables and finds a file that lost rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core.clock import utcnow
from memory_core.db import migrate_stores, open_ops, open_state
from memory_core.db.pg_store import PgDatabase
from memory_core.embedders import HashEmbedder
from memory_core.maintenance import backup_files as files
from memory_core.maintenance.backup import backup
from memory_core.maintenance.base import JobEnv
from memory_core.maintenance.drill import drill, restore_drill
from memory_core.maintenance.restore import restore
from memory_core.model.tenants import create_tenant
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write.pipeline import process_turns
from tests.helpers.memory import belief_table, day
from tests.helpers.primary import reset, rows

TEXTS = ["I live in Berlin", "I moved to Paris", "My friend Bob works at Acme",
         "Bob likes chess\nand go", "I will call Anna tomorrow"]
# Every table of the schema, the derived full-text ones included: a restore must equal.
TABLES = ("SELECT tablename FROM pg_tables WHERE schemaname = 'mnemo_primary' AND tablename "
          "NOT IN ('schema_migrations', 'fts_pending') ORDER BY 1")


def _settings(root: Path, url) -> Settings:
    return Settings.from_env({}, data_dir=root, hash_dim=32, state_backend="postgres",
                             postgres_url=url.canonical)


def _contents(db: PgDatabase) -> dict[str, list]:
    out = {}
    for (table,) in rows(db, TABLES):
        out[table] = sorted(map(repr, rows(db, f"SELECT * FROM {table}")))
    out["meta"] = [r for r in out["meta"] if "vector_type" not in r and "restored_from" not in r]
    return out


@pytest.fixture
def backed_up(tmp_path: Path, primary_urls):
    """A memory of two tenants on primary_urls[1], backed up once; (settings, the backup)."""
    for url in primary_urls[1:]:
        db = PgDatabase(url, None)
        db.migrate()
        reset(db)
        db.close()
    settings = _settings(tmp_path / "a", primary_urls[1])
    migrate_stores(settings)
    state, ops = open_state(settings), open_ops(settings)
    index = VectorIndex(HashEmbedder(dim=32))
    for tenant in ("t1", "t2"):
        create_tenant(state.conn, tenant)
    index.ensure(state.conn)
    process_turns(state, index, [TurnInput(t, "s1", f"{t}-u{i}", "user", text, day(i))
                                 for t in ("t1", "t2") for i, text in enumerate(TEXTS)])
    env = JobEnv(settings, state, ops, index, utcnow(), "manual:backup")
    report = backup(env)
    assert report.counts["tenants"] == 2 and report.counts["beliefs"] > 0
    info = files.list_backups(settings.backups_path)[-1]
    yield settings, env, info
    state.close()
    ops.close()


def test_the_backup_holds_the_primary_and_restores_into_an_empty_one(backed_up, tmp_path,
                                                                    primary_urls) -> None:
    _, env, info = backed_up
    entry = info.manifest["databases"]["state"]
    assert entry["engine"] == "postgres" and entry["tables"]["turns"] == 10
    assert (info.path / "primary" / "turns.copy").is_file()
    assert (info.path / "exports" / "t1").is_dir()  # read from the same snapshot
    source, target = env.state, PgDatabase(primary_urls[2], None)
    try:
        done = restore(info, tmp_path / "restored", primary=target)
        assert (tmp_path / "restored" / "memory_ops.db").is_file()
        assert any(f["name"].startswith("primary/") for f in done.files)
        assert _contents(target) == _contents(source)  # postings and vectors too
        assert rows(target, "SELECT value FROM meta WHERE key = 'restored_from'") == \
            [(info.name,)]
        assert belief_table(target.conn) == belief_table(source.conn)
        # the id sequences moved past the restored rows: new writes go on
        process_turns(target, env.index, [TurnInput("t1", "s2", "new", "user",
                                                    "I work at Initech", day(9))])
        # a rerun (a crash after the primary's commit) goes on to the ops file
        restore(info, tmp_path / "rerun", primary=target)
        assert (tmp_path / "rerun" / "memory_ops.db").is_file()
        assert rows(target, "SELECT count(*) FROM turns WHERE turn_uid = 'new'") == [(1,)]
        # a primary holding another memory is refused, and nothing is written
        with pytest.raises(files.RestoreRefusedError, match="is not empty"):
            restore(info, tmp_path / "again", primary=source)
        assert not (tmp_path / "again").exists()
    finally:
        target.close()


def test_a_primary_backup_needs_the_primary_to_restore(backed_up, tmp_path) -> None:
    _, _, info = backed_up
    with pytest.raises(files.RestoreRefusedError, match="MNEMO_STATE_BACKEND=postgres"):
        restore(info, tmp_path / "restored")
    assert not (tmp_path / "restored").exists()


def test_the_drill_passes_and_finds_a_dump_that_lost_rows(backed_up, tmp_path) -> None:
    settings, env, info = backed_up
    report = restore_drill(JobEnv(settings, env.state, env.ops, env.index, utcnow(),
                                  "manual:drill"))
    assert report.counts["ok"], report.counts
    dump = info.path / "primary" / "beliefs.copy"
    lines = dump.read_bytes().splitlines(keepends=True)
    dump.write_bytes(b"".join(lines[1:]))  # one row fewer, checksum made to match
    manifest = json.loads((info.path / files.MANIFEST).read_text())
    manifest["files"]["primary/beliefs.copy"]["sha256"] = files.sha256_file(dump)[0]
    (info.path / files.MANIFEST).write_text(json.dumps(manifest))
    result = drill(files.list_backups(settings.backups_path)[-1], settings.backups_path,
                   env.state)
    want = info.manifest["databases"]["state"]["tables"]["beliefs"]
    assert result.failures == [f"primary/beliefs.copy: {want - 1} rows loaded, manifest "
                               f"says {want}"]
