"""``mnemo schedules``: the eight schedules, their ledger, and firing one by hand."""

from __future__ import annotations

from contextlib import closing
from datetime import datetime, timedelta
from typing import Any

import click

from memory_core.clock import to_display, utcnow
from memory_core.db import open_ops
from memory_core.maintenance import firings
from schedules.bootstrap import firing_enqueuer
from schedules.firing import fire_manual
from schedules.table import SCHEDULES, fire_times, get_schedule
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option, redis_errors
from scripts.cli.data_dir import require_data_dir

WEEK = timedelta(days=7)


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value} ms" if value < 10_000 else f"{value / 1000:.1f} s"


@click.group()
def schedules() -> None:
    """The eight maintenance schedules: when they fire, how their windows went, manual firing.

    Times are UTC. A window is one firing of a schedule (its key: id@window start); the ledger
    in memory_ops.db records each window's outcome. Run the scheduler with `mnemo up` or
    `mnemo scheduler`.

    Example:

        mnemo schedules list
    """


def _overview(conn: Any, now: datetime) -> list[dict[str, Any]]:
    out = []
    for schedule in SCHEDULES:
        last = firings.latest(conn, schedule.id)
        out.append({
            "id": schedule.id, "job": schedule.job, "cadence": schedule.cadence,
            "next": [to_display(t) for t in fire_times(schedule, now, 3)],
            "last_window": last.window_key if last else None,
            "last_kind": last.kind if last else None,
            "outcome": last.status if last else None,
            "duration_ms": last.duration_ms if last else None,
            "misses_7d": firings.misses_since(conn, schedule.id, now - WEEK),
            "description": schedule.description,
        })
    return out


@schedules.command("list")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: Ctx, as_json: bool) -> None:
    """List the schedules: cadence, next fire time (the next three with --json), last window
    and its outcome, duration, and windows missed over the last seven days.

    Example:

        mnemo schedules list --json
    """
    require_data_dir(obj.settings)
    with closing(open_ops(obj.settings)) as db:
        rows = _overview(db.conn, utcnow())
    if as_json:
        emit_json(rows)
        return
    emit_table(["schedule", "cadence", "next fire", "last window", "outcome",
                "duration", "misses"],
               [(r["id"], r["cadence"], r["next"][0] if r["next"] else "-",
                 r["last_window"] or "-", r["outcome"] or "-", _ms(r["duration_ms"]),
                 r["misses_7d"]) for r in rows])


@schedules.command()
@click.argument("schedule_id", metavar="ID")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Newest windows shown.")
@json_option
@click.pass_obj
@handle_errors
def history(obj: Ctx, schedule_id: str, limit: int, as_json: bool) -> None:
    """The ledger of schedule ID, newest first: each window's kind (scheduled, catch_up,
    manual), status (claimed, enqueued, running, done, failed, missed), times, duration,
    attempts and error type. A missed row stands for `missed` windows from its key on.

    Example:

        mnemo schedules history macro_sleep --limit 5
    """
    schedule = get_schedule(schedule_id)  # a mistyped ID is said first, with the list
    require_data_dir(obj.settings)
    with closing(open_ops(obj.settings)) as db:
        rows = firings.history(db.conn, schedule.id, limit)
    if as_json:
        emit_json([r.as_json() for r in rows])
        return
    emit_table(["window", "kind", "status", "fired", "duration", "attempts", "missed",
                "error"],
               [(r.window_key, r.kind, r.status, to_display(r.fired_at), _ms(r.duration_ms),
                 r.attempts, r.missed_count or "", r.error or "") for r in rows])


@schedules.command()
@click.argument("schedule_id", metavar="ID")
@json_option
@click.pass_obj
@handle_errors
def fire(obj: Ctx, schedule_id: str, as_json: bool) -> None:
    """Enqueue schedule ID's job now, outside its cadence, under a window key of its own
    (manual:<uuid>, recorded as manual). A worker (`mnemo up` or `mnemo worker`) runs it.

    Example:

        mnemo schedules fire backup
    """
    schedule = get_schedule(schedule_id)
    with closing(open_ops(obj.settings)) as db:
        enqueuer = firing_enqueuer(obj.settings)
        try:
            with redis_errors(obj.settings, "did not take the message"):
                key = fire_manual(db, enqueuer, schedule, utcnow())
        finally:
            enqueuer.close()
    message_id = firings.message_id_for(key)
    if as_json:
        emit_json({"schedule": schedule.id, "job": schedule.job, "window": key,
                   "message_id": message_id})
    else:
        click.echo(f"enqueued {schedule.job} (window {key}, message {message_id})")
