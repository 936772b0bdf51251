"""Logging: one format per process (JSON off a terminal), whoever writes the line.

structlog's events, Dramatiq's and other stdlib loggers' records, tracebacks and warnings all
go through one ProcessorFormatter, checked in subprocesses and in a real worker process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dramatiq import Message
from structlog.testing import capture_logs

from memory_core.brokers import make_broker
from memory_core.embedders.base import _reset_warning_for_tests
from memory_core.settings import Settings
from tests.conftest import REPO
from tests.helpers.queue_env import marker_lines, start_worker_process, stop_process, wait_for
from workers.pool import preflight

SECRET = "my-sister-Ana-lives-in-Lisbon"

SCRIPT = """
import structlog
from memory_core.log import configure_logging
from memory_core.settings import Settings
from memory_core.embedders import warn_keyword_grade_once
from memory_core.embedders.factory import make_embedder
s = Settings.from_env({})
configure_logging(s)
configure_logging(s)
warn_keyword_grade_once(make_embedder(s))
warn_keyword_grade_once(make_embedder(s))
structlog.get_logger("t").info("turn_recorded", tenant="t1", duration_ms=3, outcome="ok")
"""

MIXED = f"""
import logging, warnings
import structlog
from dramatiq import Message
from memory_core.log import configure_logging
from memory_core.settings import Settings
from workers.middleware import install_log_redaction

settings = Settings.from_env()
configure_logging(settings)
install_log_redaction()
configure_logging(settings)
configure_logging(settings, force=True)  # the same one handler, its redaction filter kept
log = structlog.get_logger("mnemo.worker")
dramatiq_log = logging.getLogger("dramatiq.worker.WorkerThread")
library = logging.getLogger("some.library")
message = Message(queue_name="turns", actor_name="record_turn", args=(),
                  kwargs={{"text": "{SECRET}"}}, options={{}})
structlog.contextvars.bind_contextvars(message_id=message.message_id, actor="record_turn")
log.info("turn_recorded", tenant="t1")
log.debug("below_the_level")
dramatiq_log.info("Retrying message %r in %d milliseconds.", message.message_id, 100)
library.info("library_info_below_warning")
try:
    raise ValueError("boom")
except ValueError:
    dramatiq_log.error("Failed to process message %s with unhandled exception.", message,
                       exc_info=True)
    log.exception("turn_failed")
library.warning("disk %s", "low")
print("stdout is not a log line")
warnings.warn("a deprecated knob")
"""

LEVELS = """
import logging
import structlog
from memory_core.log import configure_logging
from memory_core.settings import Settings
configure_logging(Settings.from_env())
log, library = structlog.get_logger("mnemo.t"), logging.getLogger("some.library")
for name in ("debug", "info", "warning", "error"):
    getattr(log, name)("ours_" + name)
    getattr(library, name)("theirs_" + name)
"""


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, env=full)
    assert out.returncode == 0, out.stderr
    return out


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line, parsed: fails on the first line that is not a JSON log event."""
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON log line: {line!r}\n--- whole output ---\n{text}")
        assert isinstance(entry, dict) and "event" in entry and "level" in entry, line
        lines.append(entry)
    return lines


def test_json_lines_when_not_on_a_terminal_and_keyword_grade_warned_once() -> None:
    out = _run(SCRIPT)
    lines = _json_lines(out.stderr)
    events = [line["event"] for line in lines]
    assert events.count("embedder_keyword_grade") == 1
    assert "mnemo memory reindex" in lines[events.index("embedder_keyword_grade")]["fix"]
    record = lines[events.index("turn_recorded")]
    assert record["level"] == "info" and record["tenant"] == "t1" and "timestamp" in record


def _grade_warnings(data_dir: Path, *args: str) -> int:
    """How many ``embedder_keyword_grade`` lines `mnemo ARGS` logs (hash embedder)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    full.update(MNEMO_DATA_DIR=str(data_dir), MNEMO_EMBEDDER="hash", MNEMO_LOG_LEVEL="info")
    out = subprocess.run([sys.executable, "-c", "from scripts.cli import main; main()", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=120, env=full)
    assert out.returncode in (0, 1, 2), out.stderr  # health may be degraded: no workers
    return out.stderr.count("embedder_keyword_grade")


def test_the_keyword_grade_warning_is_logged_where_it_matters_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = Settings.from_env({}, data_dir=data, embedder="hash")
    _reset_warning_for_tests()
    with capture_logs() as logs:
        preflight(settings)  # `mnemo worker` / `mnemo up`, before any process starts
    assert [e["event"] for e in logs].count("embedder_keyword_grade") == 1
    assert _grade_warnings(data, "tenant", "add", "t1") == 0
    for args in (("health",), ("memory", "status"), ("queue", "stats"),
                 ("recall", "where do I live", "--tenant", "t1")):
        assert _grade_warnings(data, *args) == 0, args
    assert _grade_warnings(data, "recall", "where do I live", "--tenant", "t1",
                           "--explain") == 1


def test_structlog_dramatiq_stdlib_tracebacks_and_warnings_share_one_json_format() -> None:
    out = _run(MIXED, MNEMO_LOG_FORMAT="json", MNEMO_LOG_LEVEL="info")
    lines = _json_lines(out.stderr)
    assert [(e["logger"], e["level"]) for e in lines] == [
        ("mnemo.worker", "info"), ("dramatiq.worker.WorkerThread", "error"),
        ("mnemo.worker", "error"), ("some.library", "warning"), ("py.warnings", "warning")]
    ours, theirs, failed, library, warned = lines
    assert ours["event"] == "turn_recorded" and ours["actor"] == "record_turn"
    assert theirs["event"].startswith("Failed to process message record_turn[")
    assert theirs["message_id"] == ours["message_id"]  # contextvars reach foreign lines
    for entry in (theirs, failed):
        assert entry["exception"].startswith("Traceback (most recent call last)")
    # Dramatiq's line names the error type only: an actor's exception may quote memory text.
    assert theirs["exception"].endswith(
        "builtins.ValueError (its message is withheld: it may quote memory text)")
    assert "boom" not in theirs["exception"]
    assert failed["exception"].endswith("ValueError: boom")
    assert failed["event"] == "turn_failed"
    assert library["event"] == "disk low"
    assert "a deprecated knob" in warned["event"]
    assert all(e["timestamp"].endswith("Z") for e in lines)
    assert SECRET not in out.stderr
    assert out.stdout == "stdout is not a log line\n"


@pytest.mark.parametrize(("level", "ours", "theirs"), [
    ("debug", ["debug", "info", "warning", "error"], ["warning", "error"]),
    ("info", ["info", "warning", "error"], ["warning", "error"]),
    ("error", ["error"], ["error"]),
])
def test_third_party_records_stay_at_warning_and_up_unless_the_level_is_higher(
        level: str, ours: list[str], theirs: list[str]) -> None:
    out = _run(LEVELS, MNEMO_LOG_FORMAT="json", MNEMO_LOG_LEVEL=level)
    events = [e["event"] for e in _json_lines(out.stderr)]
    assert [e for e in events if e.startswith("ours_")] == [f"ours_{n}" for n in ours]
    assert [e for e in events if e.startswith("theirs_")] == [f"theirs_{n}" for n in theirs]


def test_a_worker_process_writes_only_json_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_DATA_DIR=str(tmp_path / "data"), MNEMO_LOG_FORMAT="json",
               MNEMO_LOG_LEVEL="info")
    sender = make_broker(Settings.from_env(env))
    sender.declare_queue("contract")
    message = sender.enqueue(Message(queue_name="contract", actor_name="mark", args=(),
                                     kwargs={"key": SECRET}, options={}))
    marker = tmp_path / "marks"
    worker = start_worker_process(env, marker, "--fail")
    try:
        wait_for(lambda: len(marker_lines(marker)) == 4, 60, 0.05)  # the run and 3 retries
        wait_for(lambda: "Retries exceeded" in Path(f"{marker}.log").read_text(), 10, 0.05)
    finally:
        code = stop_process(worker)
        sender.close()
    assert code == 0
    text = Path(f"{marker}.log").read_text()
    lines = _json_lines(text)
    events = [e["event"] for e in lines]
    assert "worker_started" in events and events[-2:] == ["worker_stopping", "worker_stopped"]
    done = [e["outcome"] for e in lines if e["event"] == "message_done"]
    assert done == ["retry", "retry", "retry", "dead"]
    failures = [e for e in lines if e["logger"] == "dramatiq.worker.WorkerThread"]
    assert len(failures) == 4
    for entry in failures:
        assert entry["event"] == (
            f"Failed to process message mark[{message.message_id}] with unhandled exception.")
        assert entry["message_id"] == message.message_id and entry["level"] == "error"
        assert entry["exception"].endswith("builtins.RuntimeError (its message is withheld: "
                                           "it may quote memory text)")
    assert any(e["event"].startswith("Retries exceeded") and e["level"] == "warning"
               for e in lines)
    assert SECRET not in text


LIBRARY = """
import sys
from memory_core import Memory
if "--app-configured" in sys.argv:
    import structlog
    structlog.configure(processors=[lambda _l, _m, event: "APP " + event["event"]],
                        logger_factory=structlog.PrintLoggerFactory(sys.stdout))
with Memory.open() as mem:
    mem.recall("where do I live", tenant="t1")
print("ANSWER")
"""


def _library_run(data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """An application's process using ``Memory`` (nothing of mnemo's CLI in it)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    full.update(MNEMO_DATA_DIR=str(data), MNEMO_EMBEDDER="hash", **env)
    out = subprocess.run([sys.executable, "-c", LIBRARY, *args], cwd=REPO,
                         capture_output=True, text=True, timeout=120, env=full)
    assert out.returncode == 0, out.stderr
    return out


def test_an_application_using_memory_gets_its_log_lines_on_stderr_never_stdout(
        tmp_path: Path) -> None:
    # structlog's default (nothing configured) prints to stdout in console format: the
    # README's example printed "[info] recall duration_ms=..." into the chat process's own
    # output, whatever MNEMO_LOG_FORMAT said.
    data = tmp_path / "data"
    for args in (("db", "migrate"), ("tenant", "add", "t1")):
        subprocess.run([sys.executable, "-c", "from scripts.cli import main; main()", *args],
                       cwd=REPO, check=True, capture_output=True, timeout=120,
                       env={**os.environ, "MNEMO_DATA_DIR": str(data)})
    out = _library_run(data, MNEMO_LOG_FORMAT="json", MNEMO_LOG_LEVEL="info")
    assert out.stdout == "ANSWER\n"
    events = [e["event"] for e in _json_lines(out.stderr)]
    assert "recall" in events and "embedder_keyword_grade" in events
    # MNEMO_LOG_LEVEL holds: the recall line is info.
    quiet = _library_run(data, MNEMO_LOG_FORMAT="json", MNEMO_LOG_LEVEL="warning")
    assert quiet.stdout == "ANSWER\n"
    assert "recall" not in [e["event"] for e in _json_lines(quiet.stderr)]
    # An application that configured structlog itself keeps its configuration.
    app = _library_run(data, "--app-configured", MNEMO_LOG_FORMAT="json")
    assert "APP recall" in app.stdout.splitlines() and app.stderr == ""
