"""bench/soak.py in a tiny configuration (embedded broker), so CI exercises the harness; and
its counts on a data dir damaged on purpose, so a soak that reports 0 can be believed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.db import migrate_stores, open_state
from tests.conftest import REPO, SHARED, service_unavailable

BENCH = REPO / "bench"
LOCOMO = SHARED / "data" / "locomo" / "locomo_dev.json"


def _need_locomo() -> None:
    if not LOCOMO.exists():
        service_unavailable(f"the LoCoMo data at {LOCOMO}")


def _results(stdout: str) -> list[dict]:
    return [json.loads(line[len("RESULT "):]) for line in stdout.splitlines()
            if line.startswith("RESULT ")]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_tiny_soak_with_a_killed_worker_loses_nothing() -> None:
    """Kills planned at 5 s and 10 s of the 15 s of sending (the chaos stops when sending
    ends, so a later kill could be missed at load 20); the drain waits are only bounds."""
    _need_locomo()
    done = subprocess.run(
        [sys.executable, str(BENCH / "soak.py"), "--brokers", "embedded", "--turns", "150",
         "--tenants", "3", "--duration", "15", "--kill-every", "5", "--lease", "5",
         "--drain-timeout", "240"],
        cwd=REPO, capture_output=True, text=True, timeout=840, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (r,) = _results(done.stdout)
    kills = [e for e in r["events"] if " kill worker" in e]
    assert 1 <= r["worker_kills"] == len(kills), r["events"]
    assert r["turns_sent"] == r["turns_recorded"] == 150
    assert (r["turns_lost"], r["followups_missing"], r["recorded_twice"],
            r["cross_tenant_rows"]) == (0, 0, 0, 0)
    assert r["differences"]["beliefs"] == r["differences"]["entities"] == 0
    assert r["differences"]["turn_episodes"] == 0
    assert "PASS" in done.stdout


@pytest.fixture
def soak_checks() -> Iterator[Any]:
    sys.path.insert(0, str(BENCH))
    try:
        import soak_checks  # the bench's own module, not a package

        yield soak_checks
    finally:
        sys.path.remove(str(BENCH))


def test_the_counts_see_a_lost_turn_a_leak_and_a_changed_belief(tmp_path: Path,
                                                                soak_checks: Any) -> None:
    _need_locomo()
    import soak_env

    checks = soak_checks
    tenants = ["soak0", "soak1"]
    turns = soak_env.soak_turns(40, tenants)
    settings = checks.settings_for(tmp_path / "a", None, 15)
    other = checks.settings_for(tmp_path / "b", None, 15)
    for s in (settings, other):
        migrate_stores(s)
        checks.replay(s, turns, tenants)
    clean = checks.measure(settings, turns, tenants)
    assert (clean["turns_lost"], clean["followups_missing"], clean["recorded_twice"],
            clean["cross_tenant_rows"]) == (0, 0, 0, 0)
    assert not any(checks.differences(checks.snapshot(settings),
                                      checks.snapshot(other)).values())

    state = open_state(settings)
    with state.conn:
        state.conn.execute("DELETE FROM turns WHERE turn_uid = ?", (turns[0]["turn_uid"],))
        state.conn.execute("DELETE FROM applied_jobs WHERE key LIKE ?",
                           (f"extract:soak1:{turns[1]['turn_uid']}:%",))
        state.conn.execute("UPDATE beliefs SET turn_uid = ? WHERE id = (SELECT min(id) FROM "
                           "beliefs WHERE tenant = 'soak0')", (turns[1]["turn_uid"],))
    state.close()
    broken = checks.measure(settings, turns, tenants)
    assert broken["turns_lost"] == 1
    assert broken["followups_missing"] == 1
    assert broken["cross_tenant_rows"] >= 1
    diffs = checks.differences(checks.snapshot(settings),
                               checks.snapshot(other))
    assert diffs["beliefs"] >= 1 and diffs["turn_episodes"] >= 1
