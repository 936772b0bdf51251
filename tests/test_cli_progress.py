"""Progress of long commands: on stderr only, a bar with rate and ETA on a terminal, plain
lines otherwise, nothing with --json or --quiet, nothing for instant work."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory_core.brokers import make_broker
from memory_core.db import open_state
from memory_core.embedders.hash import HashEmbedder
from memory_core.model.turns import TurnInput, record_turn
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from scripts.cli import main
from scripts.cli import progress as progress_mod
from scripts.cli.progress import Progress
from tests.conftest import REPO
from tests.helpers.post_turn import turn
from tests.helpers.pty_run import run_in_pty
from tests.helpers.vector_seed import seed

RATE = re.compile(r"\d+(\.\d+)?( \w?B)?/s")
ETA = re.compile(r"ETA \d+:\d\d")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _run(bar: Progress, clock: Clock, n: int = 20, step_s: float = 0.5) -> None:
    for i in range(1, n + 1):
        clock.t += step_s
        bar("enqueue", i * 100, n * 100)
    bar.close()


def test_plain_lines_every_two_seconds_with_rate_and_eta() -> None:
    clock, out = Clock(), io.StringIO()
    _run(Progress("ingest", stream=out, tty=False, clock=clock), clock)
    lines = out.getvalue().splitlines()
    # 10 s of work: a line every 2 s of the phase, then the final line
    assert lines == ["ingest enqueue 500/2000 (25%)  200/s  ETA 0:08",
                     "ingest enqueue 900/2000 (45%)  200/s  ETA 0:06",
                     "ingest enqueue 1300/2000 (65%)  200/s  ETA 0:04",
                     "ingest enqueue 1700/2000 (85%)  200/s  ETA 0:02",
                     "ingest enqueue 2000/2000 (100%)  in 0:10, 200/s"]


def test_a_bar_on_a_terminal() -> None:
    clock, out = Clock(), io.StringIO()
    _run(Progress("ingest", stream=out, tty=True, clock=clock), clock)
    text = out.getvalue()
    assert text.count("\r") > 5 and text.endswith("\n")
    assert "[" + "#" * progress_mod.BAR_WIDTH + "]" in text
    assert ETA.search(text) and RATE.search(text)


def test_instant_work_and_a_disabled_bar_show_nothing() -> None:
    clock, out = Clock(), io.StringIO()
    _run(Progress("ingest", stream=out, tty=True, clock=clock), clock, step_s=0.05)  # 1 s
    assert out.getvalue() == ""
    _run(Progress("ingest", stream=out, tty=True, clock=clock, enabled=False), clock)
    assert out.getvalue() == ""


def test_bytes_are_shown_scaled() -> None:
    clock, out = Clock(), io.StringIO()
    bar = Progress("backup", stream=out, tty=False, clock=clock, units={"copy": "B"})
    for i in range(1, 11):
        clock.t += 1
        bar("copy", i * 4_000_000, 40_000_000)
    bar.close()
    assert "4.0 MB/s" in out.getvalue() and "40.0 MB/40.0 MB (100%)" in out.getvalue()


# --- the commands, through CliRunner (stderr is not a terminal there) ---------------------

@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Show progress from the first measurable step, a line per update."""
    monkeypatch.setattr(progress_mod, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_mod, "EVERY_S", 0.0)


def _turns_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(turn(i)) + "\n" for i in range(n)), encoding="utf-8")
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {"MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "error"}


def _shown(stderr: str) -> list[str]:
    """stderr without log events (JSON lines: a test before may have set logging up at
    another level; logging is configured once per process)."""
    return [line for line in stderr.splitlines() if not line.startswith("{")]


def _invoke(env: dict[str, str], *args: str) -> Result:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_ingest_progress_goes_to_stderr_as_plain_lines(tmp_path: Path, fast: None) -> None:
    env = _env(tmp_path)
    result = _invoke(env, "ingest", str(_turns_file(tmp_path, 60)), "--create-tenant")
    lines = result.stderr.splitlines()
    enqueue = [line for line in lines if line.startswith("ingest enqueue ")]
    assert len(enqueue) > 10 and all(RATE.search(line) for line in enqueue)
    assert any(ETA.search(line) for line in enqueue)
    assert enqueue[-1].startswith("ingest enqueue 60/60 (100%) ")
    assert any(line.startswith("ingest read ") for line in lines)
    assert "\r" not in result.stderr  # not a terminal: no bar
    assert result.stdout.startswith("enqueued 60 turn(s)") and "ETA" not in result.stdout


def test_json_and_quiet_silence_progress(tmp_path: Path, fast: None) -> None:
    env = _env(tmp_path)
    path = _turns_file(tmp_path, 40)
    as_json = _invoke(env, "ingest", str(path), "--create-tenant", "--json")
    assert _shown(as_json.stderr) == []
    assert json.loads(as_json.stdout)["enqueued"] == 40
    quiet = _invoke(env, "backup", "now", "--quiet")
    assert _shown(quiet.stderr) == [] and quiet.stdout.startswith("backup ")
    loud = _invoke(env, "backup", "now")
    phases = {line.split(" ")[1] for line in _shown(loud.stderr)}
    assert {"memory_state.db", "memory_ops.db", "checksums"} <= phases, loud.stderr
    assert "B/s" in loud.stderr and "B/s" not in loud.stdout  # a rate, not a path


def test_nothing_shows_for_a_command_under_the_delay(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's own path to stderr is silent while under ``DELAY_S``; the delay itself
    is checked with a fake clock above (an ingest at load 20 can take over the real 2 s)."""
    monkeypatch.setattr(progress_mod, "DELAY_S", 600.0)
    env = _env(tmp_path)
    result = _invoke(env, "ingest", str(_turns_file(tmp_path, 20)), "--create-tenant")
    assert _shown(result.stderr) == []


def test_reindex_restore_and_backup_report_progress(tmp_path: Path, fast: None) -> None:
    env = _env(tmp_path)
    settings = Settings.from_env(env)
    db = open_state(settings)
    old = VectorIndex(HashEmbedder(dim=384))
    old.ensure(db.conn)
    seed(db.conn, "t1", 60, 20, old)
    db.close()
    result = _invoke({**env, "MNEMO_HASH_DIM": "64"}, "memory", "reindex", "--batch-size", "7")
    reindex = [line for line in result.stderr.splitlines() if line.startswith("reindex ")]
    assert any(line.startswith("reindex episodes ") and ETA.search(line) for line in reindex)
    assert any(line.startswith("reindex episodes 60/60 (100%)  in ") for line in reindex)
    assert "reindex" not in result.stdout.replace("reindexed", "")
    quiet = _invoke({**env, "MNEMO_HASH_DIM": "64"}, "memory", "reindex", "--quiet")
    assert _shown(quiet.stderr) == []
    _invoke(env, "backup", "now", "--quiet")
    restored = _invoke(env, "restore", "latest", "--to", str(tmp_path / "restored"))
    assert "restore verify " in restored.stderr and "restore copy " in restored.stderr
    assert re.search(r"restore copy .*\(100%\)  in ", restored.stderr)
    assert "restore " not in restored.stdout.replace("restored backup", "")


# --- a real terminal --------------------------------------------------------------------

_IN_A_PTY = """
import sys
import scripts.cli.progress as p
p.DELAY_S = 0.0
from scripts.cli import main
main(sys.argv[1:])
"""


def test_a_terminal_gets_a_bar_and_stdout_only_the_result(tmp_path: Path) -> None:
    """stderr is a real pty, stdout a pipe: the bar is drawn on the pty, never on stdout."""
    env = {**os.environ, **_env(tmp_path)}
    path = _turns_file(tmp_path, 300)
    screen, out, code = run_in_pty(
        [sys.executable, "-c", _IN_A_PTY, "ingest", str(path), "--create-tenant"],
        cwd=REPO, env=env)
    assert code == 0, screen[-2000:]
    assert "\r" in screen and "ingest enqueue [" in screen and "\x1b[K" in screen
    assert ETA.search(screen) and RATE.search(screen)
    assert "ingest enqueue [" + "#" * progress_mod.BAR_WIDTH + "] 300/300 (100%)" in screen
    assert out.startswith("enqueued 300 turn(s)") and "\r" not in out


# --- ingest --wait ------------------------------------------------------------------------

class Recorder(threading.Thread):
    """Records the turns of the turns queue as a worker would (the real record_turn), but
    dead-letters the turn ``refuse``."""

    def __init__(self, settings: Settings, refuse: str) -> None:
        super().__init__(daemon=True)
        self.settings, self.refuse = settings, refuse
        self.stopped = threading.Event()

    def run(self) -> None:
        broker = make_broker(self.settings)
        broker.declare_queue("turns")
        consumer = broker.consume("turns", prefetch=1, timeout=50)
        state = open_state(self.settings)
        try:
            while not self.stopped.is_set():
                message = next(consumer)
                if message is None:
                    continue
                payload = message.kwargs["turn"]
                if payload["turn_uid"] == self.refuse:
                    consumer.nack(message)
                    continue
                record_turn(state.conn, TurnInput.from_dict(payload))
                consumer.ack(message)
                time.sleep(0.05)
        finally:
            consumer.close()
            state.close()
            broker.close()


def test_ingest_wait_follows_the_turns_until_recorded(tmp_path: Path, fast: None) -> None:
    env = _env(tmp_path)
    path = _turns_file(tmp_path, 30)
    _invoke(env, "ingest", str(path), "--create-tenant", "--quiet")
    recorder = Recorder(Settings.from_env(env), refuse="u0007")
    recorder.start()
    try:
        result = CliRunner().invoke(main, ["ingest", str(path), "--wait"], env=env,
                                    catch_exceptions=False)
    finally:
        recorder.stopped.set()
        recorder.join(timeout=10)
    assert result.exit_code == 1, result.output
    assert json.loads(_invoke(env, "ingest", str(path), "--json").stdout)[
        "already_recorded"] == 29
    # The recorder may take a turn before this ingest reads what is recorded (then it
    # follows 29): whatever it followed, all but the refused turn were recorded.
    followed = re.fullmatch(r"recorded (\d+) of (\d+) turn\(s\)", result.stdout.splitlines()[-1])
    assert followed is not None, result.stdout
    assert int(followed[2]) - int(followed[1]) == 1 and 29 <= int(followed[2]) <= 30
    assert "1 turn(s) were not recorded" in result.stderr and "'u0007'" in result.stderr
    waited = [line for line in result.stderr.splitlines() if line.startswith("ingest recorded ")]
    assert waited and RATE.search(waited[0])
    assert f"{followed[1]}/{followed[2]}" in waited[-1]
