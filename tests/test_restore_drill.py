"""Restore and the restore drill on real files: checksums first, no silent overwrite, and a
drill that fails visibly (report, row, warning) on a backup damaged on purpose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from structlog.testing import capture_logs

from memory_core.db.sqlite import connect
from memory_core.maintenance import backup_files as files
from memory_core.maintenance.backup import backup
from memory_core.maintenance.drill import restore_drill
from memory_core.maintenance.restore import restore
from scripts.cli import main
from tests.helpers.backup_store import MARKER, build_memory

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def mem(tmp_path: Path):
    m = build_memory(tmp_path / "data")
    backup(m.env())
    yield m
    m.close()


def _latest(mem) -> files.BackupInfo:
    return files.list_backups(mem.settings.backups_path)[-1]


def _drills(mem) -> list[tuple[int, dict]]:
    return [(r[0], json.loads(r[1])) for r in mem.ops.conn.execute(
        "SELECT ok, detail FROM restore_drills ORDER BY id")]


def _flip_bytes(path: Path, offset: int, n: int = 64) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        data = f.read(n)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in data))


def test_a_drill_passes_on_a_good_backup_and_leaves_no_scratch(mem) -> None:
    report = restore_drill(mem.env(window="restore_drill@2025-06-06T00:00:00Z"))
    assert report.counts["ok"] == 1 and report.counts["failures"] == 0
    assert report.counts["databases"] == 2 and report.counts["tables"] > 20
    assert report.counts["files"] == len(_latest(mem).manifest["files"])
    [(ok, detail)] = _drills(mem)
    assert ok == 1 and detail["backup"] == _latest(mem).name and detail["failures"] == []
    root = mem.settings.backups_path
    assert not [p for p in root.iterdir() if p.name.startswith(".drill")]
    backup_id = mem.ops.conn.execute("SELECT backup_id FROM restore_drills").fetchone()[0]
    assert backup_id == mem.ops.conn.execute("SELECT id FROM backup_manifests").fetchone()[0]


def test_a_drill_fails_visibly_on_a_corrupted_backup(mem) -> None:
    info = _latest(mem)
    db = info.path / files.DB_FILES["state"]
    _flip_bytes(db, db.stat().st_size // 2)
    with capture_logs() as logs:
        report = restore_drill(mem.env(window="restore_drill@2025-06-06T00:00:00Z"))
    assert report.counts["ok"] == 0 and report.counts["failures"] >= 1
    [(ok, detail)] = _drills(mem)
    assert ok == 0
    assert "memory_state.db: sha256 differs from the manifest" in detail["failures"]
    [warning] = [e for e in logs if e["event"] == "restore_drill_failed"]
    assert warning["log_level"] == "warning" and warning["backup"] == info.name
    assert MARKER not in json.dumps(logs)


def test_a_drill_catches_a_damaged_page_the_checksum_was_rewritten_for(mem) -> None:
    info = _latest(mem)
    db = info.path / files.DB_FILES["state"]
    conn = connect(db)
    root_page, page_size = conn.execute(
        "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master "
        "WHERE name = 'ix_beliefs_turn'").fetchone()
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    with open(db, "r+b") as f:  # zero the cells at the end of the index's root page
        f.seek(root_page * page_size - 300)
        f.write(b"\x00" * 300)
    manifest = info.manifest
    for name in files.DB_FILES.values():
        sha, size = files.sha256_file(info.path / name)
        manifest["files"][name] = {"sha256": sha, "bytes": size}
    files.write_manifest(info.path, manifest)
    report = restore_drill(mem.env(window="restore_drill@w2"))
    [(ok, detail)] = _drills(mem)
    assert report.counts["ok"] == 0 and ok == 0
    assert [f for f in detail["failures"] if "integrity_check found" in f], detail["failures"]
    assert not [f for f in detail["failures"] if "sha256" in f]


def test_a_drill_fails_when_the_row_counts_differ(mem) -> None:
    info = _latest(mem)
    manifest = info.manifest
    manifest["databases"]["state"]["tables"]["beliefs"] += 1
    files.write_manifest(info.path, manifest)
    restore_drill(mem.env(window="restore_drill@w3"))
    [(ok, detail)] = _drills(mem)
    n = manifest["databases"]["state"]["tables"]["beliefs"]
    assert ok == 0
    assert detail["failures"] == [f"memory_state.db: table beliefs has {n - 1} rows, "
                                  f"manifest says {n}"]


def test_a_damaged_export_fails_the_drill(mem) -> None:
    path = _latest(mem).path / "exports" / "t1" / "beliefs.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    restore_drill(mem.env(window="restore_drill@w4"))
    [(ok, detail)] = _drills(mem)
    assert ok == 0
    assert detail["failures"] == ["exports/t1/beliefs.jsonl: sha256 differs from the manifest"]


def test_a_drill_with_no_backup_is_a_recorded_failure(tmp_path: Path) -> None:
    mem = build_memory(tmp_path / "data")
    try:
        report = restore_drill(mem.env(window="restore_drill@w5"))
        assert report.counts["ok"] == 0 and report.counts["backup"] == "-"
        [(ok, detail)] = _drills(mem)
        assert ok == 0 and detail["failures"][0].startswith("no complete backup in")
    finally:
        mem.close()


def test_a_drill_window_runs_once(mem) -> None:
    first = restore_drill(mem.env(window="restore_drill@w6"))
    db = _latest(mem).path / files.DB_FILES["state"]
    _flip_bytes(db, 4096)  # the window's result is already recorded: not drilled again
    again = restore_drill(mem.env(window="restore_drill@w6"))
    assert again.counts["ok"] == first.counts["ok"] == 1 and again.counts["existing"] == 1
    assert len(_drills(mem)) == 1
    assert restore_drill(mem.env(window="restore_drill@w7")).counts["ok"] == 0


def test_restore_verifies_the_checksums_before_writing(mem, tmp_path: Path) -> None:
    info = _latest(mem)
    _flip_bytes(info.path / files.DB_FILES["ops"], 100)
    target = tmp_path / "restored"
    with pytest.raises(files.BackupCorruptError, match=r"memory_ops\.db: sha256 differs"):
        restore(info, target)
    assert not target.exists()


def test_restore_refuses_a_folder_that_is_not_empty_unless_confirmed(mem, tmp_path: Path
                                                                     ) -> None:
    info = _latest(mem)
    target = tmp_path / "restored"
    target.mkdir()
    (target / "memory_state.db").write_bytes(b"old")
    (target / "memory_state.db-wal").write_bytes(b"a log of the old database")
    with pytest.raises(files.RestoreRefusedError, match="--yes"):
        restore(info, target)
    plan = restore(info, target, dry_run=True)
    assert plan.dry_run and not plan.target_was_empty
    assert {f["name"]: f["replaces"] for f in plan.files} == {"memory_state.db": True,
                                                              "memory_ops.db": False}
    assert (target / "memory_state.db").read_bytes() == b"old"  # a dry run writes nothing
    restore(info, target, overwrite=True)
    assert files.sha256_file(target / "memory_state.db")[0] == \
        info.manifest["files"]["memory_state.db"]["sha256"]
    assert not (target / "memory_state.db-wal").exists()  # never replayed into the restore
    assert sorted(p.name for p in target.iterdir()) == ["memory_ops.db", "memory_state.db"]


def _cli(mem, *args: str) -> object:
    env = {"MNEMO_DATA_DIR": str(mem.settings.data_dir), "MNEMO_HASH_DIM": "32"}
    return CliRunner().invoke(main, list(args), env=env)


def test_cli_backup_now_list_restore_and_drill(mem, tmp_path: Path) -> None:
    made = _cli(mem, "backup", "now", "--json")
    assert made.exit_code == 0, made.output
    name = json.loads(made.stdout)["backup"]
    listed = _cli(mem, "backup", "list", "--json")
    assert [b["name"] for b in json.loads(listed.stdout)][-1] == name
    target = tmp_path / "restored"
    target.mkdir()
    (target / "note.txt").write_text("keep me")
    refused = _cli(mem, "restore", name, "--to", str(target))
    assert refused.exit_code == 1 and "--yes" in refused.output
    dry = _cli(mem, "restore", name, "--to", str(target), "--dry-run")
    assert dry.exit_code == 0 and "would be refused without --yes" in dry.output
    assert sorted(p.name for p in target.iterdir()) == ["note.txt"]
    done = _cli(mem, "restore", "latest", "--to", str(target), "--yes", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["backup"] == name
    drill = _cli(mem, "restore-drill", "--json")
    assert drill.exit_code == 0 and json.loads(drill.stdout)["ok"] == 1
    listed = json.loads(_cli(mem, "backup", "list", "--json").stdout)
    assert listed[-1]["drill"]["ok"] is True


def test_cli_restore_drill_exits_3_when_it_fails(mem) -> None:
    _flip_bytes(_latest(mem).path / files.DB_FILES["state"], 8192)
    result = _cli(mem, "restore-drill")
    assert result.exit_code == 3
    assert "restore drill FAILED" in result.output and "sha256 differs" in result.output


@pytest.mark.parametrize("script", ["backup_memory.py", "restore_memory.py"])
def test_the_cron_scripts_run_as_files(script: str, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--help"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"Usage: {script}" in out.stdout and "Example:" in out.stdout


def test_the_backup_script_takes_a_backup(mem, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_DATA_DIR=str(mem.settings.data_dir), MNEMO_HASH_DIM="32")
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "backup_memory.py"), "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    name = json.loads(out.stdout)["backup"]
    assert name in [b.name for b in files.list_backups(mem.settings.backups_path)]
