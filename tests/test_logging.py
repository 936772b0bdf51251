"""structlog: JSON lines off a terminal, configured once per process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import structlog
from memory_core.log import configure_logging
from memory_core.settings import Settings
from memory_core.embedders.factory import make_embedder
s = Settings.from_env({})
configure_logging(s)
configure_logging(s)
make_embedder(s)
make_embedder(s)
structlog.get_logger("t").info("turn_recorded", tenant="t1", duration_ms=3, outcome="ok")
"""


def test_json_lines_when_not_on_a_terminal_and_keyword_grade_warned_once() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stderr.splitlines() if line.strip()]
    events = [line["event"] for line in lines]
    assert events.count("embedder_keyword_grade") == 1
    assert "mnemo memory reindex" in lines[events.index("embedder_keyword_grade")]["fix"]
    record = lines[events.index("turn_recorded")]
    assert record["level"] == "info" and record["tenant"] == "t1" and "timestamp" in record
