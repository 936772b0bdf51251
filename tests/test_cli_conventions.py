"""The CLI's conventions, over the whole click tree: every command that prints a result takes
``--json`` and its stdout then parses (run for real against a data directory written by the
workers' pipeline); the long-running commands print one JSON object per line; every date
option takes ``YYYY-MM-DD`` or ISO-8601, UTC when no zone is given, and says so in ``-h``;
dates are printed as ``YYYY-MM-DD`` or ISO-8601 UTC with Z, in tables and in JSON; an error
is one ``Error:`` line with the fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from memory_core.health import UNHEALTHY
from scripts.cli import exit_codes, main
from scripts.cli.dates import DATE, DateTimeParam
from scripts.cli.docs import walk
from tests.helpers.cli_data import a_belief_id, cli_env, local_zone_not_utc, seed_data_dir
from tests.helpers.post_turn import turn

__all__ = ["local_zone_not_utc"]  # a fixture used here

LEAVES = {" ".join(path): cmd for path, cmd in walk(main) if not isinstance(cmd, click.Group)}

# Commands that print no result, so take no --json (none today): name -> why.
NO_JSON: dict[str, str] = {}

# Commands whose --json is run by another test: name -> where and why not here.
ELSEWHERE = {
    "demo": "starts a worker pool for ~15 s: tests/test_demo.py runs `demo --json` (slow)",
    "worker": "runs until stopped: test_long_running_commands_print_json_lines",
    "up": "runs until stopped: test_long_running_commands_print_json_lines",
    "scheduler": "runs until stopped: test_long_running_commands_print_json_lines",
    "mirror sync": "needs a mirror server: tests/mirrors/test_neo4j_mirror.py",
    "mirror reconcile": "needs a mirror server: tests/mirrors/test_reconcile.py",
    "mirror promote": "needs a Postgres primary: tests/primary/test_promote.py",
    "beliefs invalidate": "changes this module's shared memory: "
                          "tests/test_cli_beliefs_invalidate.py runs `beliefs invalidate --json`",
}

# The rest, run in this order with --json on one data directory ({belief}, {turns},
# {restore_to}: filled in by the test). Exit codes other than 0 that are expected here.
CHEAP: dict[str, list[str]] = {
    "db migrate": [], "db version": [],
    "tenant add": ["t3"], "tenant list": [],
    "ingest": ["{turns}", "--tenant", "t3"],
    "beliefs list": ["-t", "t1", "--as-of", "2024-05-02"],
    "beliefs history": ["-t", "t1", "Sam", "lives_in"],
    "beliefs reextract": ["-t", "t1", "--dry-run"],
    "entities list": ["-t", "t1"],
    "recall": ["where does Sam live?", "-t", "t1", "--as-of", "2024-05-02T12:30:00"],
    "digest": ["-t", "t1", "--date", "2024-05-02"],
    "memory status": [], "memory explain": ["{belief}", "-t", "t1"],
    "memory recollect": ["u0003", "-t", "t1", "-c", "2"],
    "memory reindex": [], "memory sweep": ["--dry-run"],
    "mirror status": [],
    "queue stats": [], "queue dead": [], "queue requeue": [], "queue verify": [],
    "queue purge": ["--dry-run"],
    "schedules list": [], "schedules history": ["macro_sleep"], "schedules fire": ["backup"],
    "backup now": [], "backup list": [],
    "restore": ["latest", "--to", "{restore_to}", "--dry-run"],
    "restore-drill": [],
    "health": [],
}
EXIT = {"health": {0, 1, 2}}  # no worker runs here: health may well say unhealthy


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory the tests below share (recall only adds to its recall log)."""
    path = tmp_path_factory.mktemp("conventions") / "data"
    seed_data_dir(path)
    return path


def test_every_command_is_classified() -> None:
    """A new command must say how its --json is tested (or why it has none)."""
    assert set(LEAVES) == set(CHEAP) | set(ELSEWHERE) | set(NO_JSON)
    assert not set(CHEAP) & set(ELSEWHERE)


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_every_command_that_prints_a_result_has_json(name: str) -> None:
    options = {o for p in LEAVES[name].params if isinstance(p, click.Option) for o in p.opts}
    assert ("--json" in options) != (name in NO_JSON), (
        f"`mnemo {name}` has no --json option" if name not in NO_JSON
        else f"`mnemo {name}` is in NO_JSON ({NO_JSON[name]}) but has --json")


def test_every_cheap_command_prints_json_that_parses(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = seed_data_dir(data)
    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps({k: v for k, v in turn(i).items() if k != "tenant"})
                             + "\n" for i in range(3)), encoding="utf-8")
    fill = {"{belief}": a_belief_id(settings), "{turns}": str(turns),
            "{restore_to}": str(tmp_path / "restored")}
    runner = CliRunner()
    for name, args in CHEAP.items():
        argv = [*name.split(), *(fill.get(a, a) for a in args), "--json"]
        result = runner.invoke(main, argv, env=cli_env(data))
        assert result.exit_code in EXIT.get(name, {0}), (name, result.output[-2000:])
        try:
            parsed = json.loads(result.stdout)
        except ValueError:
            pytest.fail(f"`mnemo {' '.join(argv)}` printed no JSON: {result.stdout[:500]!r}")
        assert parsed is not None, name
        odd = [text for text in _strings(parsed) if LOOKS_LIKE_A_TIME.match(text)
               and not ISO_UTC.match(text)]
        assert odd == [], f"`mnemo {name} --json`: times not ISO-8601 UTC with Z: {odd[:3]}"
        table = runner.invoke(main, argv[:-1], env=cli_env(data))
        assert table.exit_code in EXIT.get(name, {0}), (name, table.output[-2000:])
        odd = [word for word in DATE_IN_TEXT.findall(table.stdout)
               if not (DAY.fullmatch(word) or ISO_UTC.fullmatch(word))]
        assert odd == [], f"`mnemo {name}` prints dates not as YYYY-MM-DD or ISO-8601 with Z: " \
                          f"{odd[:3]}"


DATE_IN_TEXT = re.compile(r"(?<![\w/.-])(?:\d{4}-)?\d{2}-\d{2}(?:[T ]\d{2}:\d{2}[^\s,;)]*)?")
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
LOOKS_LIKE_A_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d")
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


# Start and stop of a worker pool (spawned interpreters importing the pipeline) at load 20
# on 2 cores: minutes, not the seconds they take idle. The killer bounds the whole run.
RUN_S = 600


def _run_until(argv: list[str], env: dict[str, str], *, watch: str,
               running: Callable[[str], bool]) -> tuple[int, list[str], str]:
    """Start ``mnemo argv`` and read its ``watch`` stream ("stdout" or "stderr") line by
    line; SIGTERM it at the first line that says it runs (``running``; else it is ending by
    itself: a signal would race its exit). (exit code, every line of that stream, the other
    stream's text.)"""
    mnemo = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
    proc = subprocess.Popen([mnemo, *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(RUN_S, proc.kill)  # a command that never starts fails, not hangs
    killer.start()
    try:
        stream = proc.stdout if watch == "stdout" else proc.stderr
        assert stream is not None
        seen = []
        for line in stream:
            seen.append(line.rstrip("\n"))
            if running(line):
                proc.send_signal(signal.SIGTERM)
                break
        out, err = proc.communicate(timeout=RUN_S)
    finally:
        killer.cancel()
    rest, other = (out, err) if watch == "stdout" else (err, out)
    return proc.returncode, [*seen, *rest.splitlines()], other


def _run_until_started(argv: list[str], env: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    """Start ``mnemo argv``, SIGTERM it once stdout says it started; (exit code, every
    stdout line parsed as JSON)."""
    code, lines, err = _run_until(argv, env, watch="stdout",
                                  running=lambda line: '"started"' in line)
    assert lines and all(line.strip() for line in lines), (lines, err[-2000:])
    return code, [json.loads(line) for line in lines]


@pytest.mark.slow
@pytest.mark.timeout(RUN_S + 300)  # the killer fails it first, with what it printed
@pytest.mark.parametrize("argv", [["worker", "--processes", "1", "--threads", "1"],
                                  ["up", "--processes", "1", "--threads", "1"],
                                  ["scheduler"]], ids=["worker", "up", "scheduler"])
def test_long_running_commands_print_json_lines(tmp_path: Path, argv: list[str]) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "info"}
    code, events = _run_until_started([*argv, "--json"], env)
    assert code == 0
    assert [e["event"] for e in events] == ["started", "stopped"]
    assert events[1]["outcome"] == "ok"
    assert {e["command"] for e in events} == {argv[0]}
    assert datetime.fromisoformat(events[0]["at"]).tzinfo is not None


def test_a_long_running_command_that_cannot_start_says_so_in_json(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "memory_ops.db").write_bytes(b"SQLite format 3\0" + b"\x07" * 3000)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DATA_DIR": str(data)}
    code, events = _run_until_started(["scheduler", "--json"], env)
    assert code == 4  # a damaged database (the exit-code table)
    assert [(e["event"], e["outcome"]) for e in events] == [("stopped", "error")]
    assert "memory_ops.db" in events[0]["error"]


@pytest.mark.parametrize("argv", [["worker", "--processes", "1"], ["up", "--processes", "1"],
                                  ["scheduler"]], ids=["worker", "up", "scheduler"])
def test_a_long_running_command_that_refuses_prints_no_start_banner(
        tmp_path: Path, argv: list[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "memory_ops.db").write_bytes(b"SQLite format 3\0" + b"\x07" * 3000)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DATA_DIR": str(data)}
    mnemo = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
    out = subprocess.run([mnemo, *argv], env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 4, out.stderr[-2000:]  # a damaged database
    assert "memory_ops.db" in out.stderr
    assert "SIGTERM or Ctrl-C stops" not in out.stderr  # no line saying it runs


@pytest.mark.timeout(RUN_S + 300)
def test_a_long_running_command_logging_json_says_it_runs_as_a_log_event(
        tmp_path: Path) -> None:
    # Off a terminal the log lines on stderr are JSON (MNEMO_LOG_FORMAT=auto): the banner
    # "mnemo: scheduler on the ... broker" was one plain line among them, and a log
    # shipper parsing the stream stopped there.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "info"}
    code, stderr, _ = _run_until(  # it runs: the event, or the plain banner
        ["scheduler"], env, watch="stderr",
        running=lambda line: '"running"' in line or "SIGTERM or Ctrl-C stops" in line)
    lines = [line for line in stderr if line.strip()]
    events = [json.loads(line) for line in lines]  # fails on a line that is not JSON
    assert code == 0, lines[-5:]
    running = [e for e in events if e["event"] == "running"]
    assert len(running) == 1 and running[0]["command"] == "scheduler", lines
    assert running[0]["broker"] == "embedded" and running[0]["level"] == "info"


READ_ONLY = [["health"], ["health", "--worker"], ["health", "--scheduler", "--json"],
             ["queue", "stats"], ["queue", "stats", "--watch", "--count", "1"],
             ["queue", "dead"], ["beliefs", "list"], ["beliefs", "history", "user", "lives_in"],
             ["entities", "list"], ["tenant", "list"], ["schedules", "list"],
             ["schedules", "history", "macro_sleep"], ["memory", "status"],
             ["recall", "where do I live"]]


@pytest.mark.parametrize("argv", READ_ONLY, ids=[" ".join(a) for a in READ_ONLY])
def test_a_read_only_command_on_a_missing_data_dir_creates_nothing(
        tmp_path: Path, argv: list[str]) -> None:
    data = tmp_path / "nowhere" / "data"
    result = CliRunner().invoke(main, argv, env={"MNEMO_DATA_DIR": str(data)})
    assert not (tmp_path / "nowhere").exists()
    assert result.exit_code == (exit_codes.HEALTH_EXIT_CODES[UNHEALTHY] if argv[0] == "health"
                                else exit_codes.MNEMO_ERROR), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "`mnemo up`" in lines[0] and "MNEMO_DATA_DIR" in lines[0], lines


# -- dates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
    ("2024-05-01T12:30:00", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
    ("2024-05-01 12:30", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
    ("2024-05-01T12:30:00Z", datetime(2024, 5, 1, 12, 30, tzinfo=UTC)),
    ("2024-05-01T12:30:00+02:00", datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
    ("2024-05-01T00:30:00-05:00", datetime(2024, 5, 1, 5, 30, tzinfo=UTC)),
])
@pytest.mark.usefixtures("local_zone_not_utc")
def test_a_date_is_a_day_or_iso_8601_in_utc(text: str, expected: datetime) -> None:
    value = DATE.convert(text, None, None)
    assert value == expected and value.utcoffset() is not None and value.tzinfo == UTC


@pytest.mark.parametrize("text", ["May 1st", "2024-13-01", "yesterday", "2024-05-01T25:00",
                                  "0001-01-01T00:00:00+01:00", "x" * 200])
def test_a_bad_date_is_a_usage_error_in_the_users_terms(text: str) -> None:
    result = CliRunner().invoke(main, ["beliefs", "list", "--as-of", text])
    assert result.exit_code == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: Invalid value for '--as-of': ")
    assert "YYYY-MM-DD or ISO-8601" in last or "out of range" in last
    assert "timezone-aware" not in result.output and "tzinfo" not in result.output


def _options() -> list[tuple[str, click.Option]]:
    return [(f"{name} {opt.opts[0]}", opt) for name, cmd in sorted(LEAVES.items())
            for opt in cmd.params if isinstance(opt, click.Option)]


DATE_WORDS = {"date", "day", "time", "when", "since", "until", "before", "after", "at", "of"}


def _sounds_like_a_date(name: str | None) -> bool:
    """as_of, date, day, start_time, created_at, ...: not timeout or processes."""
    return bool(set((name or "").split("_")) & DATE_WORDS)


def test_every_date_option_uses_the_one_type_and_says_utc_in_its_help() -> None:
    dated = [(where, o) for where, o in _options() if isinstance(o.type, DateTimeParam)]
    assert {where for where, _ in dated} >= {"recall --as-of", "beliefs list --as-of",
                                             "digest --date"}
    for where, option in dated:
        assert "UTC when no zone is given" in (option.help or ""), where
        assert "YYYY-MM-DD or ISO-8601" in (option.help or ""), where
    named_like_a_date = [where for where, o in _options()
                         if _sounds_like_a_date(o.name) and not isinstance(o.type, DateTimeParam)]
    assert named_like_a_date == [], "date options not of the DATE type"


@pytest.mark.parametrize("name", ["recall", "digest", "beliefs list"])
def test_dash_h_says_how_dates_are_read(name: str) -> None:
    result = CliRunner().invoke(main, [*name.split(), "-h"], terminal_width=400)
    assert "UTC when no zone is given" in " ".join(result.output.split())


def test_recall_takes_a_time_without_a_zone(seeded: Path) -> None:
    """Refused before with "pass a timezone-aware datetime (e.g. tzinfo=UTC)"."""
    data = seeded
    for as_of, city in (("2024-05-02T12:30:00", "Berlin"), ("2024-05-01", None)):
        result = CliRunner().invoke(main, ["recall", "where does Sam live?", "-t", "t1",
                                           "--as-of", as_of, "--json"], env=cli_env(data))
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["as_of"].startswith(as_of[:10])
        objects = {f["object"] for f in out["facts"]
                   if (f["subject"], f["predicate"]) == ("Sam", "lives_in")}
        assert objects == ({city} if city else set()), objects


# -- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "code", "says"), [
    (["recall", "hi", "-t", "nope"], 1, "tenant 'nope' does not exist: check the name with "
                                        "`mnemo tenant list`"),
    (["digest", "-t", "nope"], 1, "`mnemo tenant list`"),
    (["memory", "recollect", "u0001", "-t", "nope"], 1, "`mnemo tenant list`"),
    (["beliefs", "history", "-t", "t1", "Sam", "lives"], 1, "unknown predicate 'lives': use "
                                                             "one of"),
    (["memory", "explain", "belief:b_none", "-t", "t1"], 1, "use an id shown by `mnemo recall`"),
    (["schedules", "history", "nightly"], 1, "unknown schedule 'nightly': the schedules are"),
    (["recall", "hi", "--as-of", "last week"], 2, "'last week' is not a date: use YYYY-MM-DD or "
                                                  "ISO-8601"),
    (["digest", "--date", "2024-02-30"], 2, "'2024-02-30' is not a date"),
])
def test_an_error_is_one_line_saying_what_and_the_fix(seeded: Path, args: list[str],
                                                      code: int, says: str) -> None:
    data = seeded
    result = CliRunner().invoke(main, args, env=cli_env(data))
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if "Error" in line]
    assert len(errors) == 1 and errors[0].startswith("Error: ") and says in errors[0], errors
    assert "Traceback" not in result.output and result.stdout == ""
    assert "timezone-aware" not in result.output
