"""mnemo's exit codes in one place: the constants the commands exit with, and the table
docs/cli.md and README.md show (``render_table``; tests/test_exit_codes.py checks both files
and runs a command for each code).

Two codes mean different things for `mnemo health` than for other commands (1 degraded,
2 unhealthy: what monitoring expects), so the table has a column for it; `mnemo mirror
reconcile` has one too (0 clean, 1 drift, 2 error: what its cron callers test).
"""

from __future__ import annotations

import click

from memory_core.health import DEGRADED, OK, UNHEALTHY
from memory_core.health import EXIT_CODES as HEALTH_EXIT_CODES

SUCCESS = 0
MNEMO_ERROR = click.ClickException.exit_code  # 1
USAGE_ERROR = click.UsageError.exit_code  # 2
DRILL_FAILED = 3
STORAGE_FAULT = 4
BAD_INPUT = 5  # `mnemo ingest` (and `ingest --check`): bad lines in the file
# `mnemo mirror reconcile` (and scripts/reconcile_memory_mirror.py): its own meanings.
RECONCILE_CLEAN = 0
RECONCILE_DRIFT = 1
RECONCILE_ERROR = 2

_EVERY = {
    SUCCESS: "success",
    MNEMO_ERROR: "a mnemo error: the `Error:` line says what is wrong and how to fix it",
    USAGE_ERROR: "a usage error: an unknown command or option, a bad value",
    DRILL_FAILED: "`mnemo restore-drill` only: the drill ran and failed (it is recorded)",
    STORAGE_FAULT: "a database is damaged, read-only or full: the `Error:` line names the file "
                   "and the fix (docs/databases.md, \"Storage faults\")",
    BAD_INPUT: "bad input data: `mnemo ingest` (or `--check`) found bad lines in the file, "
               "each listed with its number and reason; nothing was enqueued",
}
_HEALTH = {
    OK: "healthy; the probes `--worker` / `--scheduler`: alive (`--worker --ready`: ready)",
    DEGRADED: "degraded",
    UNHEALTHY: "unhealthy (a storage fault is its `state_db` / `ops_db` check); the probes: "
               "not alive (`--worker --ready`: not ready, e.g. paused on a storage fault)",
}


_RECONCILE = {
    RECONCILE_CLEAN: "clean, or every drifted fact repaired",
    RECONCILE_DRIFT: "drift found (`--dry-run`), or left after the repair",
    RECONCILE_ERROR: "an error: a mirror down or not configured, a bad option or tenant",
}


def rows() -> list[tuple[int, str, str, str]]:
    """(code, meaning for every command, for `mnemo health`, for `mnemo mirror reconcile`),
    by code."""
    health = {code: _HEALTH[status] for status, code in HEALTH_EXIT_CODES.items()}
    return [(code, every, health.get(code, "-"), _RECONCILE.get(code, "-"))
            for code, every in sorted(_EVERY.items())]


def render_table() -> str:
    """The Markdown table (the same text in docs/cli.md and README.md)."""
    lines = ["| exit | every command | `mnemo health` | `mnemo mirror reconcile` |",
             "|---|---|---|---|"]
    lines += [f"| {code} | {every} | {health} | {rec} |" for code, every, health, rec in rows()]
    return "\n".join(lines) + "\n"
