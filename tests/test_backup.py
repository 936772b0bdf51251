"""The backup job on real files: restorable copies that match the manifest, once per window,
retention, per-tenant exports, consistency under concurrent writes, the Postgres dump."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.db import open_ops, open_state
from memory_core.db.migrations import latest_version
from memory_core.maintenance import backup_files as files
from memory_core.maintenance.backup import backup, snapshot
from memory_core.maintenance.restore import restore
from memory_core.settings import Settings
from tests.helpers.backup_store import MARKER, NOW, WINDOW, build_memory, feed, open_memory
from tests.helpers.post_turn import snapshot as memory_snapshot

GRAPHML = "{http://graphml.graphdrawing.org/xmlns}"


@pytest.fixture
def mem(tmp_path: Path):
    m = build_memory(tmp_path / "data")
    yield m
    m.close()


def _only_backup(mem) -> files.BackupInfo:
    backups = files.list_backups(mem.settings.backups_path)
    assert len(backups) == 1
    return backups[0]


def test_a_backup_restores_to_databases_matching_the_manifest(mem, tmp_path: Path) -> None:
    report = backup(mem.env())
    info = _only_backup(mem)
    assert report.counts["backup"] == info.name and report.counts["existing"] == 0
    assert report.counts["tenants"] == 2 and report.counts["beliefs"] > 0
    target = tmp_path / "restored"
    restore(info, target)
    for kind, db in info.manifest["databases"].items():
        sha, size = files.sha256_file(target / db["file"])
        assert (sha, size) == (info.manifest["files"][db["file"]]["sha256"],
                               info.manifest["files"][db["file"]]["bytes"])
        assert db["schema_version"] == latest_version(kind)
    restored = Settings.from_env({}, data_dir=target)
    state, ops = open_state(restored), open_ops(restored)
    try:
        for kind, db in (("state", state), ("ops", ops)):
            assert files.table_counts(db.conn) == info.manifest["databases"][kind]["tables"]
            assert db.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert memory_snapshot(state.conn) == memory_snapshot(mem.state.conn)
        assert info.manifest["databases"]["state"]["tables"]["entity_merges"] == 1
    finally:
        state.close()
        ops.close()
    assert info.manifest["databases"]["state"]["embedder"]["embedder_identity"] == \
        "hash:v1:dim=32"
    assert info.manifest["window"] == WINDOW and info.manifest["created_at"].startswith(
        "2025-06-01T06:00:00")
    row = mem.ops.conn.execute("SELECT path, manifest FROM backup_manifests").fetchall()
    assert [(r[0], json.loads(r[1])) for r in row] == [(str(info.path), info.manifest)]


def test_the_same_window_twice_makes_one_backup(mem) -> None:
    first = backup(mem.env())
    again = backup(mem.env(now=NOW + timedelta(minutes=5)))  # a redelivery, later
    assert again.counts == {"existing": 1, "backup": first.counts["backup"]}
    assert len(files.list_backups(mem.settings.backups_path)) == 1
    assert mem.ops.conn.execute("SELECT count(*) FROM backup_manifests").fetchone()[0] == 1
    backup(mem.env(window="backup@2025-06-01T12:00:00Z", now=NOW + timedelta(hours=6)))
    assert len(files.list_backups(mem.settings.backups_path)) == 2


def test_a_crash_between_rename_and_record_is_repaired_by_the_rerun(mem) -> None:
    backup(mem.env())
    mem.ops.conn.execute("DELETE FROM backup_manifests")  # as if killed before the record
    assert backup(mem.env()).counts["existing"] == 1
    assert mem.ops.conn.execute("SELECT count(*) FROM backup_manifests").fetchone()[0] == 1


def test_a_killed_backup_leaves_nothing_that_looks_complete(mem, monkeypatch) -> None:
    root = mem.settings.backups_path
    leftover = root / ".tmp-20261130T000000Z-deadbeef-0001"  # what a SIGKILL leaves
    leftover.mkdir(parents=True)
    (leftover / files.DB_FILES["state"]).write_bytes(b"half a copy")

    def crash(*args, **kwargs):
        raise OSError(28, "disk full")

    monkeypatch.setattr("memory_core.maintenance.backup.export_tenant", crash)
    with pytest.raises(files.BackupError, match=r"disk full.*nothing was kept"):
        backup(mem.env())
    assert files.list_backups(root) == []
    assert sorted(p.name for p in root.iterdir()) == [".lock"]  # leftover cleaned too
    monkeypatch.undo()
    assert backup(mem.env()).counts["existing"] == 0
    assert len(files.list_backups(root)) == 1


def test_retention_keeps_the_newest_n(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "data", backup_keep=3)
    try:
        feed(mem, "t1", 6)
        names = []
        for i in range(5):
            when = NOW + timedelta(hours=6 * i)
            names.append(backup(mem.env(window=f"backup@{when.isoformat()}", now=when))
                         .counts["backup"])
        kept = [b.name for b in files.list_backups(mem.settings.backups_path)]
        assert kept == names[2:]
        paths = {r[0] for r in mem.ops.conn.execute("SELECT path FROM backup_manifests")}
        assert paths == {str(mem.settings.backups_path / n) for n in kept}
        assert not [p for p in mem.settings.backups_path.iterdir() if p.name.startswith(".del")]
    finally:
        mem.close()


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_exports_hold_every_belief_of_their_tenant_and_nothing_else(mem) -> None:
    backup(mem.env())
    info = _only_backup(mem)
    conn = mem.state.conn
    for tenant in ("t1", "t2"):
        folder = info.path / "exports" / tenant
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            ["beliefs.jsonl", "belief_graph.graphml", "episodes.jsonl", "entity_merges.jsonl",
             "audit_log.jsonl"])
        beliefs = _jsonl(folder / "beliefs.jsonl")
        statuses = dict(conn.execute("SELECT status, count(*) FROM beliefs WHERE tenant = ? "
                                     "GROUP BY status", (tenant,)).fetchall())
        assert statuses.get("superseded", 0) > 0
        assert {s: sum(b["status"] == s for b in beliefs) for s in statuses} == statuses
        superseded = next(b for b in beliefs if b["status"] == "superseded")
        assert superseded["valid_to"] and superseded["retired_at"] and superseded["recorded_at"]
        for name in ("beliefs.jsonl", "episodes.jsonl", "entity_merges.jsonl",
                     "audit_log.jsonl"):
            assert {r["tenant"] for r in _jsonl(folder / name)} <= {tenant}
        episodes = _jsonl(folder / "episodes.jsonl")
        assert len(episodes) == conn.execute("SELECT count(*) FROM episodes WHERE tenant = ?",
                                             (tenant,)).fetchone()[0]
        assert all(e["turn_uids"] for e in episodes)
    t1 = info.path / "exports" / "t1"
    assert not [p.name for p in t1.iterdir() if MARKER.encode() in p.read_bytes()]
    assert MARKER.encode() in (info.path / "exports/t2/beliefs.jsonl").read_bytes()
    assert [m["ledger"] for m in _jsonl(t1 / "entity_merges.jsonl")] == ["live"]
    assert [a["object_id"] for a in _jsonl(t1 / "audit_log.jsonl")] == ["b1"]
    assert info.manifest["exports"]["t2"]["audit_log"] == 2


def test_the_graphml_is_the_belief_graph(mem) -> None:
    backup(mem.env())
    info = _only_backup(mem)
    root = ET.parse(info.path / "exports/t1/belief_graph.graphml").getroot()
    graph = root.find(f"{GRAPHML}graph")
    node_ids = [n.get("id") for n in graph.iter(f"{GRAPHML}node")]
    nodes = set(node_ids)
    assert len(node_ids) == len(nodes), "a node is declared twice"
    edges = list(graph.iter(f"{GRAPHML}edge"))
    conn = mem.state.conn
    assert len(edges) == conn.execute("SELECT count(*) FROM beliefs WHERE tenant = 't1'"
                                      ).fetchone()[0]
    entities = {f"e:{r[0]}" for r in conn.execute(
        "SELECT entity_id FROM entities WHERE tenant = 't1'")}
    assert entities <= nodes
    assert all(e.get("source") in nodes and e.get("target") in nodes for e in edges)

    def data(edge: ET.Element) -> dict[str, str | None]:
        return {d.get("key"): d.text for d in edge.iter(f"{GRAPHML}data")}

    superseded = [data(e) for e in edges if data(e)["e_status"] == "superseded"]
    assert superseded and all(d["e_valid_to"] and d["e_valid_from"] for d in superseded)
    assert info.manifest["exports"]["t1"]["graph_edges"] == len(edges)


def test_a_backup_taken_while_another_thread_writes_is_consistent(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "data")
    feed(mem, "t1", 60)
    steps, writes = [0], [0]

    def write_between_steps(status: int, remaining: int, total: int) -> None:
        steps[0] += 1
        if writes[0] < 10:  # a commit from another thread lands between two steps
            worker = threading.Thread(target=feed, args=(mem, "t1", 1, 1000 + writes[0]))
            worker.start()
            worker.join()
            writes[0] += 1

    before = mem.state.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
    pages = mem.state.conn.execute("PRAGMA page_count").fetchone()[0]
    with snapshot(mem.state, tmp_path / "copy.db", pages=2, progress=write_between_steps) as c:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert c.execute("SELECT count(*) FROM turns").fetchone()[0] == before
        orphans = c.execute("SELECT count(*) FROM turns t WHERE NOT EXISTS (SELECT 1 FROM "
                            "episode_turns et WHERE et.turn_id = t.id)").fetchone()[0]
        assert orphans == 0
        c.execute("INSERT INTO turns_fts(turns_fts) VALUES ('integrity-check')")
    assert writes[0] == 10 and mem.state.conn.execute(
        "SELECT count(*) FROM turns").fetchone()[0] == before + 10
    assert steps[0] <= pages // 2 + 1, "the copy restarted after a foreign write"
    mem.close()


def test_the_backup_job_runs_while_a_worker_writes(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "data")
    feed(mem, "t1", 30)
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        i = 2000
        while not stop.is_set():
            feed(mem, "t2", 1, i)
            i += 1
            written[0] += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        backup(mem.env())
    finally:
        stop.set()
        thread.join()
    info = _only_backup(mem)
    restore(info, tmp_path / "restored")
    copy = open_state(Settings.from_env({}, data_dir=tmp_path / "restored"))
    try:
        assert copy.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert files.table_counts(copy.conn) == info.manifest["databases"]["state"]["tables"]
    finally:
        copy.close()
    assert written[0] > 0
    mem.close()


def test_a_backup_is_refused_while_another_holds_the_lock(mem) -> None:
    with files.folder_lock(mem.settings.backups_path), \
            pytest.raises(files.BackupBusyError, match="lock is held"):
        backup(mem.env())
    assert backup(mem.env()).counts["existing"] == 0


def test_without_a_postgres_mirror_the_dump_is_skipped_and_said(mem) -> None:
    report = backup(mem.env())
    assert report.counts["postgres_dump"].startswith("skipped: no Postgres mirror configured")
    assert not (_only_backup(mem).path / "postgres.dump").exists()


@pytest.mark.postgres
def test_a_configured_postgres_mirror_is_dumped(tmp_path: Path, postgres_url: str) -> None:
    # trust auth ignores the password, so this also runs the passfile path
    mem = open_memory(tmp_path / "data", postgres_url=postgres_url,
                      postgres_password="not-a-secret")
    try:
        feed(mem, "t1", 6)
        assert backup(mem.env()).counts["postgres_dump"] == "dumped"
        info = _only_backup(mem)
        dump = info.path / "postgres.dump"
        assert dump.read_bytes()[:5] == b"PGDMP"
        assert info.manifest["files"]["postgres.dump"]["bytes"] == dump.stat().st_size
    finally:
        mem.close()


def test_a_failing_pg_dump_fails_the_job_and_keeps_nothing(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "data",
                      postgres_url="postgresql://mnemo@127.0.0.1:1/mirror",
                      postgres_password="hunter2secret")
    try:
        with pytest.raises(files.BackupError) as err:
            backup(mem.env())
        message = str(err.value)
        assert "pg_dump of postgresql://mnemo@127.0.0.1:1/mirror failed" in message
        assert "hunter2secret" not in message
        root = mem.settings.backups_path
        assert files.list_backups(root) == [] and sorted(p.name for p in root.iterdir()) == [
            ".lock"]
    finally:
        mem.close()


def test_a_restore_brings_back_no_heartbeats_of_the_processes_then(mem, tmp_path: Path) -> None:
    """The backup drops the heartbeats from its copy: after a restore, `mnemo health` must not
    take the workers that ran when the backup was taken for workers that died."""
    from memory_core import heartbeats

    beat = heartbeats.Heartbeater(mem.ops, heartbeats.WORKER, interval_s=5, keep_s=3600)
    assert beat.beat()
    assert len(heartbeats.read_all(mem.ops.conn)) == 1
    backup(mem.env())
    info = _only_backup(mem)
    assert info.manifest["databases"]["ops"]["tables"]["heartbeats"] == 0
    restore(info, tmp_path / "restored")
    ops = open_ops(Settings.from_env({}, data_dir=tmp_path / "restored"), migrate=False)
    try:
        assert heartbeats.read_all(ops.conn) == []
    finally:
        ops.close()
    assert len(heartbeats.read_all(mem.ops.conn)) == 1  # the live database keeps its own
