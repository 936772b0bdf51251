"""``mnemo health``: the whole report, or one process's liveness probe."""

from __future__ import annotations

import click

from memory_core.clock import utcnow
from memory_core.health import EXIT_CODES, UNHEALTHY, Check, HealthEnv, overall, probe, run_checks
from scripts.cli.app import Ctx, emit_json, emit_table, json_option
from scripts.cli.data_dir import require_data_dir


def _probe(obj: Ctx, role: str, pid: int | None, ready: bool) -> list[Check]:
    env = HealthEnv(obj.settings, utcnow())
    name = f"{role}_ready" if ready else f"{role}_alive"
    try:
        return run_checks(env, [(name, lambda e: probe(e, role, pid=pid, ready=ready))])
    finally:
        env.close()


def _report(obj: Ctx) -> list[Check]:
    """The whole report. Its checks import the broker, mirror and schedule code (numpy,
    SQLAlchemy, redis: about a second of CPU), which the probes, run every few seconds by a
    deployment, do not need."""
    from schedules.health import health_report

    return health_report(obj.settings, utcnow())


@click.command()
@click.option("--worker", "role", flag_value="worker",
              help="Liveness probe: a worker process on this host has a fresh heartbeat.")
@click.option("--scheduler", "role", flag_value="scheduler",
              help="Liveness probe: a scheduler process on this host has a fresh heartbeat.")
@click.option("--pid", type=click.IntRange(1), default=None,
              help="With --worker or --scheduler: that process only.")
@click.option("--ready", is_flag=True,
              help="With --worker: readiness, not liveness: fails while the worker is paused "
                   "on a read-only, full or damaged database.")
@json_option
@click.pass_obj
@click.pass_context
def health(ctx: click.Context, obj: Ctx, role: str | None, pid: int | None, ready: bool,
           as_json: bool) -> None:
    """Check memory, the queue and the processes; exit 0 healthy, 1 degraded, 2 unhealthy.

    Checks, each named with its status and reason: both databases (the state the workers
    pause on: damaged by PRAGMA quick_check, read-only, full, missing; then the schema
    version), the broker (reachable; Redis with appendonly), queue depth, the oldest ready
    message, dead letters, the spool, fresh worker heartbeats (a worker paused on a storage
    fault is named), the embedder recorded for the data against the configured one and rows
    missing a vector, the scheduler's leader lease, each schedule's last window (within
    twice its cadence), the last restore drill, mirror lag, and mirror drift (what the
    last reconcile or backup check found; docs/mirrors.md). Thresholds are MNEMO_HEALTH_*
    settings (docs/configuration.md). quick_check reads every page: seconds per gigabyte.

    With --worker or --scheduler it is a fast liveness probe for one process (Kubernetes,
    compose): exit 0 when a process of that role on this host (or --pid) wrote a
    heartbeat within MNEMO_HEALTH_STALE_S, else 2. A worker paused on a storage fault is
    alive (restarting it would not help) but not ready: `--worker --ready` exits 2 while
    it is paused (a readinessProbe).

    Example:

        mnemo health --json

        mnemo health --worker --pid 4242

        mnemo health --worker --ready
    """
    require_data_dir(obj.settings, EXIT_CODES[UNHEALTHY])
    if pid is not None and role is None:
        raise click.UsageError("--pid goes with --worker or --scheduler")
    if ready and role != "worker":
        raise click.UsageError("--ready goes with --worker")
    checks = _probe(obj, role, pid, ready) if role else _report(obj)
    status = overall(checks)
    if as_json:
        emit_json({"status": status, "checks": [c.as_json() for c in checks]})
    else:
        emit_table(["check", "status", "reason"], [[c.name, c.status, c.reason] for c in checks])
        click.echo(f"health: {status}")
    ctx.exit(EXIT_CODES[status])
