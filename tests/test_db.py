"""The connection factory, migrations and schema versions, on real database files."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import MetaData

from memory_core.db import atomic, open_ops, open_state, schema_ops, schema_state
from memory_core.db import sqlite as sqlite_mod
from memory_core.db.migrations import latest_version
from memory_core.db.stores import Database, reopen_connections
from memory_core.errors import SchemaTooNewError, StoreError
from memory_core.settings import Settings
from scripts.cli import main

KINDS = [("state", open_state, schema_state.metadata), ("ops", open_ops, schema_ops.metadata)]


def _pragmas(conn) -> dict:
    return {
        "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
        "foreign_keys": conn.execute("PRAGMA foreign_keys").fetchone()[0],
        "synchronous": conn.execute("PRAGMA synchronous").fetchone()[0],
        "busy_timeout": conn.execute("PRAGMA busy_timeout").fetchone()[0],
        "mmap_size": conn.execute("PRAGMA mmap_size").fetchone()[0],
        "vec": conn.execute("SELECT vec_version()").fetchone()[0],
    }


@pytest.mark.parametrize(("kind", "opener", "_md"), KINDS)
def test_every_connection_has_the_pragmas_and_sqlite_vec(kind, opener, _md, tmp_path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path, busy_timeout_ms=1234,
                                 sqlite_mmap_mb=3)
    db = opener(settings)
    seen = []

    def probe() -> None:
        seen.append(_pragmas(db.conn))

    threads = [threading.Thread(target=probe) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    probe()
    fresh = db.connect()
    seen.append(_pragmas(fresh))
    fresh.close()
    assert len(seen) == 5
    for p in seen:
        assert p["journal_mode"] == "wal"
        assert p["foreign_keys"] == 1
        assert p["synchronous"] == 1  # NORMAL
        assert p["busy_timeout"] == 1234
        assert p["mmap_size"] == 3 * 2**20
        assert p["vec"].startswith("v")
    assert db.path.exists() and db.path.stat().st_size > 0  # a real file, not :memory:
    db.close()


def test_fts5_is_available_on_state_connections(state_db: Database) -> None:
    conn = state_db.conn
    assert conn.execute("SELECT count(*) FROM turns_fts").fetchone()[0] == 0


def _schema(conn) -> dict[str, set[str]]:
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return {t: {r[1] for r in conn.execute(f"PRAGMA table_info('{t}')")} for t in tables}


@pytest.mark.parametrize(("kind", "opener", "metadata"), KINDS)
def test_migrations_run_forward_from_empty_and_are_idempotent(
        kind: str, opener, metadata: MetaData, tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    db = opener(settings)
    assert db.version() == latest_version(kind)
    before = _schema(db.conn)
    assert db.migrate() == []  # nothing pending the second time
    assert db.migrate() == []
    assert _schema(db.conn) == before
    versions = [r[0] for r in db.conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, latest_version(kind) + 1))
    # The migrated schema is exactly the metadata (plus virtual tables and their shadows).
    for name, table in metadata.tables.items():
        assert before[name] == {c.name for c in table.columns}, name
    db.close()


@pytest.mark.parametrize(("kind", "opener", "_md"), KINDS)
def test_a_too_new_schema_is_refused_untouched(kind, opener, _md, tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    db = opener(settings)
    db.conn.execute("PRAGMA user_version = 99")
    path = db.path
    db.close()
    with pytest.raises(SchemaTooNewError) as err:
        opener(settings)
    message = str(err.value)
    assert str(path) in message
    assert "schema version 99, newer than this mnemo knows" in message
    assert "upgrade mnemo" in message
    check = Database(path, kind)
    assert check.conn.execute("PRAGMA user_version").fetchone()[0] == 99
    check.close()


def test_swapped_databases_are_refused(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    open_state(settings).close()
    open_ops(settings).close()
    swapped = Database(settings.state_db_path, "ops")
    with pytest.raises(StoreError, match="is not a mnemo ops database"):
        swapped.migrate()


def test_an_interrupted_migration_leaves_nothing_half_done(tmp_path: Path, monkeypatch) -> None:
    from memory_core.db import migrations

    def boom(conn) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("crash in the middle of a migration")

    broken = (*migrations.STATE_MIGRATIONS,
              migrations.Migration(latest_version("state") + 1, "broken", boom))
    monkeypatch.setitem(migrations.MIGRATIONS, "state", broken)
    db = Database(tmp_path / "memory_state.db", "state")
    with pytest.raises(RuntimeError):
        db.migrate()
    conn = db.conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    db.close()


def test_an_old_schema_without_migrate_asks_for_mnemo_db_migrate(tmp_path: Path,
                                                                 monkeypatch) -> None:
    from memory_core.db import migrations

    settings = Settings.from_env({}, data_dir=tmp_path)
    open_state(settings).close()
    nxt = latest_version("state") + 1
    newer = (*migrations.STATE_MIGRATIONS,
             migrations.Migration(nxt, "next", lambda conn: conn.execute("CREATE TABLE t2 (x)")))
    monkeypatch.setitem(migrations.MIGRATIONS, "state", newer)
    with pytest.raises(StoreError, match="run `mnemo db migrate`"):
        open_state(settings, migrate=False)
    db = open_state(settings)  # migrating forward works
    assert db.version() == nxt
    db.close()


def test_atomic_rolls_back_and_keeps_the_original_error(state_db: Database) -> None:
    conn = state_db.conn
    with pytest.raises(ZeroDivisionError), atomic(conn):
        conn.execute("INSERT INTO tenants (tenant, created_at) VALUES ('a', 'x')")
        with atomic(conn):
            conn.execute("INSERT INTO tenants (tenant, created_at) VALUES ('b', 'x')")
        1 / 0  # noqa: B018
    assert conn.execute("SELECT count(*) FROM tenants").fetchone()[0] == 0
    with atomic(conn):
        conn.execute("INSERT INTO tenants (tenant, created_at) VALUES ('a', 'x')")
        with pytest.raises(ValueError), atomic(conn):
            conn.execute("INSERT INTO tenants (tenant, created_at) VALUES ('b', 'x')")
            raise ValueError("inner only")
    assert [r[0] for r in conn.execute("SELECT tenant FROM tenants")] == ["a"]


def test_no_extension_capable_sqlite_gives_the_fix(monkeypatch) -> None:
    monkeypatch.setattr(sqlite_mod, "_module", None)
    monkeypatch.setattr(sqlite_mod, "_can_load_extensions", lambda mod: False)
    with pytest.raises(StoreError, match="pip install pysqlite3-binary"):
        sqlite_mod.sqlite_module()


def test_missing_fts5_gives_the_fix(monkeypatch) -> None:
    real = sqlite_mod.sqlite_module()

    class NoFts:
        def execute(self, sql: str):
            raise real.OperationalError("no such module: fts5")

        def close(self) -> None:
            pass

    class NoFtsModule:  # a SQLite module built without FTS5
        Error = real.Error

        @staticmethod
        def connect(path: str) -> NoFts:
            assert path == ":memory:"  # probed on the module, never on a file
            return NoFts()

    monkeypatch.setattr(sqlite_mod, "_fts5_checked", set())
    with pytest.raises(StoreError, match="no FTS5 full-text search"):
        sqlite_mod._check_fts5(NoFtsModule)


def test_an_fts5_without_contentless_delete_gives_the_fix(monkeypatch) -> None:
    real = sqlite_mod.sqlite_module()

    class OldFts:  # FTS5 of a SQLite older than 3.43
        def execute(self, sql: str) -> None:
            if "contentless_delete" in sql:
                raise real.OperationalError("unrecognized option: \"contentless_delete\"")

        def close(self) -> None:
            pass

    class OldModule:
        Error = real.Error
        sqlite_version = "3.40.1"

        @staticmethod
        def connect(path: str) -> OldFts:
            return OldFts()

    monkeypatch.setattr(sqlite_mod, "_fts5_checked", set())
    with pytest.raises(StoreError, match=r"3\.40\.1.*SQLite 3\.43 or newer.*pysqlite3-binary"):
        sqlite_mod._check_fts5(OldModule)


def test_an_unwritable_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="MNEMO_DATA_DIR"):
        open_state(Settings.from_env({}, data_dir=blocker / "sub"))


def test_cli_db_migrate_is_idempotent(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"MNEMO_DATA_DIR": str(tmp_path)}
    first = runner.invoke(main, ["db", "migrate", "--json"], env=env)
    assert first.exit_code == 0, first.output
    assert '"applied": [\n      "0001' in first.output
    second = runner.invoke(main, ["db", "migrate", "--json"], env=env)
    assert second.exit_code == 0, second.output
    assert '"applied": []' in second.output
    version = runner.invoke(main, ["db", "version"], env=env)
    assert version.exit_code == 0 and "memory_state.db" in version.output


def test_cli_refuses_a_too_new_database_with_exit_1(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    db = open_state(settings)
    db.conn.execute("PRAGMA user_version = 42")
    db.close()
    result = CliRunner().invoke(main, ["memory", "status"], env={"MNEMO_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 1
    assert "newer than this mnemo knows" in result.output


def _open_fds_on(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    return sum(1 for fd in Path("/proc/self/fd").iterdir() if _link(fd) == str(path))


def _link(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:  # closed between listing and reading
        return ""


# SQLite keeps a closed connection's descriptor for reuse while other connections of the
# process have the file open (closing it would drop their POSIX locks): one spare at most.
_SPARE_FD = 1


def test_reopen_connections_closes_the_replaced_connection(state_db: Database) -> None:
    state_db.conn.execute("SELECT 1")
    baseline = _open_fds_on(state_db.path)
    replaced = []
    for _ in range(5):
        replaced.append(weakref.ref(state_db.conn))
        reopen_connections()
        state_db.conn.execute("SELECT 1")  # the thread's next use reopens, closes the old
    assert [ref() for ref in replaced] == [None] * 5  # nothing keeps them
    assert _open_fds_on(state_db.path) <= baseline + _SPARE_FD


def test_a_replaced_connection_still_held_is_closed_once_dropped(state_db: Database) -> None:
    held = state_db.conn
    reopen_connections()
    assert state_db.conn is not held
    state_db.conn.execute("SELECT 1")
    assert held.execute("SELECT 1").fetchone() == (1,)  # its holder can finish with it
    ref = weakref.ref(held)
    del held
    state_db.conn.execute("SELECT 1")
    assert ref() is None


def test_reopen_connections_keeps_a_connection_inside_its_transaction(
        state_db: Database) -> None:
    with atomic(state_db.conn) as conn:
        reopen_connections()
        assert state_db.conn is conn  # mid-transaction: replaced after the commit
    assert state_db.conn is not conn
