"""``mnemo health``: the whole report, or one process's liveness probe."""

from __future__ import annotations

import click

from memory_core.clock import utcnow
from memory_core.health import EXIT_CODES, Check, HealthEnv, overall, probe, run_checks
from schedules.health import health_report
from scripts.cli.app import Ctx, emit_json, emit_table, json_option


def _probe(obj: Ctx, role: str, pid: int | None) -> list[Check]:
    env = HealthEnv(obj.settings, utcnow())
    try:
        return run_checks(env, [(f"{role}_alive", lambda e: probe(e, role, pid=pid))])
    finally:
        env.close()


@click.command()
@click.option("--worker", "role", flag_value="worker",
              help="Liveness probe: a worker process on this host has a fresh heartbeat.")
@click.option("--scheduler", "role", flag_value="scheduler",
              help="Liveness probe: a scheduler process on this host has a fresh heartbeat.")
@click.option("--pid", type=click.IntRange(1), default=None,
              help="With --worker or --scheduler: that process only.")
@json_option
@click.pass_obj
@click.pass_context
def health(ctx: click.Context, obj: Ctx, role: str | None, pid: int | None,
           as_json: bool) -> None:
    """Check memory, the queue and the processes; exit 0 healthy, 1 degraded, 2 unhealthy.

    Checks, each named with its status and reason: both databases (PRAGMA quick_check,
    schema version), the broker (reachable; Redis with appendonly), queue depth, the
    oldest ready message, dead letters, the spool, fresh worker heartbeats, the embedder
    recorded for the data against the configured one, the scheduler's leader lease, each
    schedule's last window (within twice its cadence), the last restore drill and mirror
    lag. Thresholds are MNEMO_HEALTH_* settings (docs/configuration.md). quick_check reads
    every page: seconds per gigabyte.

    With --worker or --scheduler it is a fast liveness probe for one process (Kubernetes,
    compose): exit 0 when a process of that role on this host (or --pid) wrote a
    heartbeat within MNEMO_HEALTH_STALE_S, else 2.

    Example:

        mnemo health --json

        mnemo health --worker --pid 4242
    """
    if pid is not None and role is None:
        raise click.UsageError("--pid goes with --worker or --scheduler")
    checks = _probe(obj, role, pid) if role else health_report(obj.settings, utcnow())
    status = overall(checks)
    if as_json:
        emit_json({"status": status, "checks": [c.as_json() for c in checks]})
    else:
        emit_table(["check", "status", "reason"], [[c.name, c.status, c.reason] for c in checks])
        click.echo(f"health: {status}")
    ctx.exit(EXIT_CODES[status])
