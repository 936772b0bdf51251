"""``mnemo mirror status``: lag per mirror in changes and seconds, and the last error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core.backends import BackendURL
from memory_core.mirrors.outbox import ship_all
from memory_core.mirrors.postgres import PostgresSink
from memory_core.mirrors.sink import MirrorUnavailable
from scripts.cli import main
from tests.helpers.post_turn import Driver, make_context, record_messages, turn
from tests.mirrors.conftest import closed_port_url

pytestmark = pytest.mark.postgres


def _status(data: Path, url: BackendURL, *extra: str) -> tuple[int, str]:
    env = {"MNEMO_DATA_DIR": str(data), "MNEMO_HASH_DIM": "32",
           "MNEMO_POSTGRES_URL": url.canonical, "MNEMO_POSTGRES_PASSWORD": "pw-not-shown-9"}
    result = CliRunner().invoke(main, ["mirror", "status", *extra], env=env)
    assert "pw-not-shown-9" not in result.output
    return result.exit_code, result.output


def test_status_shows_lag_then_the_error_then_caught_up(tmp_path: Path,
                                                        pgvector_database: BackendURL) -> None:
    data = tmp_path / "m"
    ctx = make_context(data)  # no mirror configured while the memory is written
    try:
        Driver(ctx).run_fifo(record_messages(ctx.settings, [turn(i) for i in range(5)]))
        pending = ctx.state.conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
        assert pending > 5

        code, out = _status(data, pgvector_database, "--json")
        assert code == 0, out
        (row,) = json.loads(out)["mirrors"]
        assert row["sink"] == "postgres" and row["target"] == pgvector_database.canonical
        assert row["lag_changes"] == pending and row["lag_seconds"] >= 0
        assert row["cursor"] == 0 and row["last_error"] is None

        down = PostgresSink(closed_port_url(), "pw-not-shown-9", connect_timeout_s=1)
        with pytest.raises(MirrorUnavailable):
            ship_all(ctx.state.conn, ctx.ops.conn, [down])
        code, out = _status(data, pgvector_database)
        assert code == 0 and "MirrorUnavailable: Postgres mirror at" in out
        assert f"{pending}" in out

        sink = PostgresSink(pgvector_database, None)
        try:
            ship_all(ctx.state.conn, ctx.ops.conn, [sink])
        finally:
            sink.close()
        code, out = _status(data, pgvector_database, "--json")
        (row,) = json.loads(out)["mirrors"]
        assert (row["lag_changes"], row["lag_seconds"], row["last_error"]) == (0, 0.0, None)
        assert row["cursor"] == row["head"] and row["shipped_at"]
    finally:
        ctx.close()


def test_status_without_a_mirror_says_so(tmp_path: Path) -> None:
    env = {"MNEMO_DATA_DIR": str(tmp_path / "m")}
    result = CliRunner().invoke(main, ["mirror", "status"], env=env)
    assert result.exit_code == 0 and "no mirror configured" in result.output
