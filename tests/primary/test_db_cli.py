"""`mnemo db migrate` and `mnemo db version` with the Postgres primary as the state store:
they name it by its canonical URL (a ``Path`` folded its ``//``) and `db version` reads the
primary's schema version, not the absent state file's."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from memory_core.db.migrations import latest_version
from memory_core.db.pg_store import LATEST
from scripts.cli import main


def test_db_commands_name_and_read_the_primary(tmp_path: Path, primary_urls) -> None:
    url = primary_urls[2]
    env = {"MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_STATE_BACKEND": "postgres",
           "MNEMO_POSTGRES_URL": url.canonical, "MNEMO_HASH_DIM": "32",
           "MNEMO_LOG_LEVEL": "error"}
    migrated = CliRunner().invoke(main, ["db", "migrate", "--json"], env=env)
    assert migrated.exit_code == 0, migrated.output
    rows = json.loads(migrated.output)
    assert rows[0]["database"] == f"{url.canonical}#mnemo_primary"
    assert rows[0]["version"] == LATEST

    shown = CliRunner().invoke(main, ["db", "version", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    state, ops = json.loads(shown.output)
    assert state == {"database": f"{url.canonical}#mnemo_primary", "version": LATEST,
                     "latest": LATEST}
    assert ops["database"].endswith("memory_ops.db")
    assert ops["version"] == latest_version("ops")
