"""The chat process never writes a schema: ``Memory.open`` only checks both databases.

Schemas are created and upgraded by `mnemo db migrate` (``migrate_stores``) and the workers
at start. A database that is missing or behind is refused with the fix and left exactly as it
was (byte for byte; a missing file is not created); a newer one is refused as too new.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core import Memory
from memory_core.db import Database, migrate_stores, migrations, open_state, sqlite_module
from memory_core.errors import SchemaTooNewError, StoreError
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from scripts.cli import main
from workers.pool import WorkerPool

KINDS = ("state", "ops")
LATEST = {kind: migrations.latest_version(kind) for kind in KINDS}


def _path(settings: Settings, kind: str) -> Path:
    return Path(getattr(settings, f"{kind}_db_path"))


def _fingerprint(db_path: Path) -> dict[str, str]:
    """sha256 of the database file and of its -wal / -shm, for those that exist."""
    files = [db_path, db_path.with_name(db_path.name + "-wal"),
             db_path.with_name(db_path.name + "-shm")]
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.exists()}


def _refusal(settings: Settings) -> StoreError | None:
    """Open memory as the chat process does; the StoreError it refused with, or None."""
    try:
        Memory.open(settings).close()
    except StoreError as e:
        return e
    return None


def _one_version_ahead(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """This code now knows one more version of ``kind`` (a harmless new table)."""
    step = migrations.Migration(LATEST[kind] + 1, "a harmless table",
                                lambda conn: conn.execute("CREATE TABLE next_one (x)"))
    monkeypatch.setitem(migrations.MIGRATIONS, kind, (*migrations.MIGRATIONS[kind], step))


@pytest.mark.parametrize("kind", KINDS)
def test_a_database_one_version_behind_is_refused_and_left_byte_identical(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    migrate_stores(settings)  # both current, with the real migrations
    _one_version_ahead(monkeypatch, kind)
    path = _path(settings, kind)
    before = _fingerprint(path)
    assert path.name in before
    refused = _refusal(settings)
    # The bytes first: they must be unchanged however the open ended.
    assert _fingerprint(path) == before
    assert refused is not None, "Memory.open accepted a database one version behind"
    message = str(refused)
    assert str(path) in message
    assert (f"has schema version {LATEST[kind]}, this mnemo needs {LATEST[kind] + 1}"
            in message)
    assert "run `mnemo db migrate`" in message
    assert "migrate both databases on start" in message
    assert _fingerprint(_path(settings, "state" if kind == "ops" else "ops"))  # still there
    # The fix the message names works: migrate, then the chat process opens.
    assert [m.applied for m in migrate_stores(settings) if m.kind == kind] == [
        (migrations.MIGRATIONS[kind][-1],)]
    with Memory.open(settings) as mem:
        db = mem.state_db if kind == "state" else mem.ops_db
        assert db.version() == LATEST[kind] + 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_database_is_refused_and_not_created(settings: Settings, kind: str) -> None:
    migrate_stores(settings)
    path = _path(settings, kind)
    path.unlink()
    assert _fingerprint(path) == {}  # no -wal / -shm left behind by the migration either
    refused = _refusal(settings)
    assert _fingerprint(path) == {}  # not created, however the open ended
    assert refused is not None, "Memory.open accepted a missing database"
    message = str(refused)
    assert f"{path} (the {kind} database) does not exist" in message
    assert "run `mnemo db migrate`" in message


def test_a_fresh_data_directory_is_refused_and_nothing_is_created(settings: Settings) -> None:
    assert not settings.data_dir.exists()
    with pytest.raises(StoreError, match="does not exist: run `mnemo db migrate`"):
        Memory.open(settings)
    assert not settings.data_dir.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_newer_database_is_still_too_new(settings: Settings, kind: str) -> None:
    migrate_stores(settings)
    path = _path(settings, kind)
    db = Database(path, kind)
    db.conn.execute(f"PRAGMA user_version = {LATEST[kind] + 1}")
    db.close()
    before = _fingerprint(path)
    with pytest.raises(SchemaTooNewError, match="newer than this mnemo knows"):
        Memory.open(settings)
    assert _fingerprint(path) == before


def test_a_current_database_opens_and_the_state_db_is_read_only(settings: Settings) -> None:
    migrate_stores(settings)
    state = open_state(settings, migrate=False)  # what `mnemo tenant add` does
    create_tenant(state.conn, "acme")
    state.close()
    with Memory.open(settings) as mem:
        assert mem.state_db.readonly
        assert mem.recall("anything at all", tenant="acme").items == ()
        with pytest.raises(sqlite_module().OperationalError, match="readonly"):
            mem.state_db.conn.execute("INSERT INTO tenants (tenant, created_at) "
                                      "VALUES ('x', 'y')")


def test_mnemo_db_migrate_makes_a_fresh_directory_ready_for_the_chat(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["db", "migrate"], env={"MNEMO_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    with Memory.open(Settings.from_env({}, data_dir=tmp_path)) as mem:
        assert (mem.state_db.version(), mem.ops_db.version()) == (LATEST["state"],
                                                                  LATEST["ops"])


def test_starting_the_workers_migrates_before_the_chat_opens(settings: Settings) -> None:
    pool = WorkerPool(settings, processes=0, threads=1)  # the bootstrap alone, no process
    pool.start()
    try:
        with Memory.open(settings) as mem:
            assert (mem.state_db.version(), mem.ops_db.version()) == (LATEST["state"],
                                                                      LATEST["ops"])
    finally:
        pool.stop()
