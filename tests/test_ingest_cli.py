"""``mnemo ingest``: every line checked first; a bad line names its number, sends nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from memory_core.brokers import make_broker
from memory_core.settings import Settings
from scripts.cli import main
from tests.helpers.post_turn import turn


def _env(tmp_path: Path) -> dict[str, str]:
    return {"MNEMO_DATA_DIR": str(tmp_path / "data")}


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in rows), encoding="utf-8")
    return path


def _ready(env: dict[str, str]) -> int:
    broker = make_broker(Settings.from_env(env))
    try:
        return sum(s.ready for s in broker.queue_stats())
    finally:
        broker.close()


def _line(i: int) -> dict:
    return {k: v for k, v in turn(i).items() if k != "tenant"}


def test_ingest_enqueues_every_turn_and_creates_the_tenant(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = _write(tmp_path / "turns.jsonl", [_line(i) for i in range(5)] + [""] +
                  [{**_line(9), "tenant": "other"}])
    runner = CliRunner()
    refused = runner.invoke(main, ["ingest", str(path), "--tenant", "acme"], env=env)
    assert refused.exit_code == 1
    assert "--create-tenant" in refused.output and "acme" in refused.output
    assert _ready(env) == 0
    done = runner.invoke(main, ["ingest", str(path), "--tenant", "acme", "--create-tenant",
                                "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"enqueued": 6, "already_recorded": 0,
                                       "already_queued": 0, "tenants": ["acme", "other"],
                                       "created_tenants": ["acme", "other"]}
    assert _ready(env) == 6


def test_a_bad_line_is_named_and_nothing_is_enqueued(tmp_path: Path) -> None:
    env = _env(tmp_path)
    secret = "my sister Ana lives in Lisbon"
    cases = [
        ([_line(0), "{not json", _line(2)], "line 2: not a JSON object"),
        ([_line(0), _line(1), {**_line(2), "occurred_at": "soon"}], "line 3: occurred_at"),
        ([_line(0), {**_line(1), "speaker": None, "text": secret}], "line 2: turn speaker"),
        ([_line(0), {**_line(1), "mood": "happy"}], "line 2: turn has unknown keys"),
        ([_line(0), _line(1), _line(0)], "line 3: turn_uid 'u0000' is already used on line 1"),
        (["[1, 2]"], "line 1: expected a JSON object"),
    ]
    for rows, expected in cases:
        path = _write(tmp_path / "bad.jsonl", rows)
        result = CliRunner().invoke(main, ["ingest", str(path), "--create-tenant"], env=env)
        assert result.exit_code == 5, result.output
        assert expected in result.output, result.output
        assert secret not in result.output
        assert _ready(env) == 0


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(_line(0)).replace("Sam", "S\u00e9m").encode("latin-1") + b"\n")
    result = CliRunner().invoke(main, ["ingest", str(path)], env=_env(tmp_path))
    assert result.exit_code == 5 and "line 1: not UTF-8" in result.output
