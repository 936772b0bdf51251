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


def test_every_bad_line_is_listed_up_to_the_bound_and_nothing_is_enqueued(
        tmp_path: Path) -> None:
    env = _env(tmp_path)
    secret = "my sister Ana lives in Lisbon"
    rows: list[object] = [_line(0)]
    rows += [{**_line(i), "occurred_at": "2024-05-01T12:00:00", "text": secret}
             for i in range(1, 61)]  # 60 bad: no zone
    rows += [_line(61), "{oops", _line(0)]  # not JSON; a reused turn_uid
    path = _write(tmp_path / "bad.jsonl", rows)
    for args in (["--check"], [], ["--check", "--create-tenant"]):
        result = CliRunner().invoke(main, ["ingest", str(path), *args], env=env)
        assert result.exit_code == 5, result.output
        listed = result.stderr.splitlines()
        assert listed[0] == ("line 2: occurred_at has no time zone: end it with Z (UTC) or an "
                             "offset like +02:00, e.g. 2024-05-01T12:00:00Z")
        assert [line.split(":")[0] for line in listed[:50]] == [
            f"line {n}" for n in range(2, 52)]
        assert listed[50:] == [
            "... and 12 more bad line(s)",
            f"Error: 62 bad line(s) in {path} (listed above): "
            + ("fix them first" if "--check" in args else
               "fix them and run `mnemo ingest` again") + "; nothing was enqueued"]
        assert result.stdout == "" and secret not in result.output
        assert "timezone-aware" not in result.output
        assert _ready(env) == 0
    as_json = CliRunner().invoke(main, ["ingest", str(path), "--check", "--json"], env=env)
    assert as_json.exit_code == 5
    report = json.loads(as_json.stdout)
    assert (report["ok"], report["bad_count"], report["lines"], report["enqueued"]) == (
        False, 62, 64, 0)
    assert len(report["bad_lines"]) == 50
    assert report["bad_lines"][0]["line"] == 2


def test_check_of_a_good_file_enqueues_nothing_then_ingest_does(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = _write(tmp_path / "turns.jsonl", [_line(i) for i in range(4)])
    checked = CliRunner().invoke(main, ["ingest", str(path), "--check", "--tenant", "acme",
                                        "--json"], env=env)
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout) == {"ok": True, "turns": 4, "tenants": ["acme"],
                                          "bad_count": 0, "bad_lines": [], "enqueued": 0}
    text = CliRunner().invoke(main, ["ingest", str(path), "--check"], env=env)
    assert text.stdout == f"{path}: 4 turn(s) for tenant(s) default, every line valid; " \
                          "nothing enqueued (--check)\n"
    assert _ready(env) == 0
    done = CliRunner().invoke(main, ["ingest", str(path), "--tenant", "acme",
                                     "--create-tenant"], env=env)
    assert done.exit_code == 0, done.output
    assert _ready(env) == 4
