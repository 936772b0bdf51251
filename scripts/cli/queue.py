"""``mnemo queue``: look into the task queue and act on its dead letters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import click

from memory_core.brokers import make_broker
from memory_core.errors import BrokerError
from memory_core.jobs import QUEUES
from scripts.cli import queue_watch
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option, redis_errors
from scripts.cli.data_dir import require_data_dir
from scripts.cli.dates import show_time

queue_option = click.option("--queue", "queue_name", metavar="NAME",
                            help="Only this queue (default: all).")


@contextmanager
def _admin(obj: Ctx) -> Iterator[Any]:
    """The configured broker, without middleware, with the contract's queues declared.

    A Redis error becomes a BrokerError naming the (redacted) URL and the fix.
    """
    _require_queue_file(obj)
    broker = make_broker(obj.settings)
    try:
        with redis_errors(obj.settings, "did not answer"):
            for name in QUEUES:
                broker.declare_queue(name)
            yield broker
    finally:
        broker.close()


def _require_queue_file(obj: Ctx) -> None:
    """The embedded queue is a file in the data dir: a missing data dir is refused, not
    created (with Redis the queue is elsewhere, and the spool's file is made on demand)."""
    if obj.settings.broker_kind == "embedded":
        require_data_dir(obj.settings)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


@click.group()
def queue() -> None:
    """The task queue: counts per queue, dead letters, requeue and purge.

    Works on the configured broker (MNEMO_BROKER_URL: embedded by default, or Redis).

    Example:

        mnemo queue stats
    """


@queue.command()
@click.option("--watch", is_flag=True,
              help="Refresh until Ctrl-C, with each queue's drain rate and ETA.")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(0.1),
              metavar="S", help="Seconds between refreshes with --watch.")
@click.option("--count", type=click.IntRange(1), default=None, hidden=True,
              help="Stop after this many refreshes (tests).")
@json_option
@click.pass_obj
@handle_errors
def stats(obj: Ctx, watch: bool, interval: float, count: int | None, as_json: bool) -> None:
    """Per queue: ready, delayed, in flight, dead, spooled, and the age of the oldest ready
    message.

    Spooled: messages the chat side put in the local spool (memory_ops.db) because Redis did
    not answer; the relay forwards them when it does (embedded broker: no spool, "-"). While
    Redis is down its counts show "-", the spool still shows, and the exit code is 1.
    --watch refreshes every --interval seconds with each queue's backlog (ready + delayed +
    spooled), how fast it drains and when it will be empty: a redrawn table on a terminal,
    timestamped lines otherwise, a JSON object per line with --json. Ctrl-C exits 0.

    Example:

        mnemo queue stats --watch --interval 5
    """
    _require_queue_file(obj)
    if watch:
        queue_watch.watch(obj.settings, interval=interval, count=count, as_json=as_json,
                          age=_age)
        return
    with queue_watch.sampler(obj.settings) as sampler:
        sample = sampler.sample()
    if as_json:
        emit_json(queue_watch.as_dict([sample], with_rates=False))
    else:
        click.echo(f"broker: {sample.broker}")
        queue_watch.print_table([sample], _age, with_rates=False)
        if sample.spooled is not None:
            click.echo(f"spool: {sum(sample.spooled.values())} message(s) waiting for Redis")
    if sample.error:
        raise BrokerError(sample.error)


@queue.command()
@queue_option
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100_000),
              help="Most dead letters to list.")
@json_option
@click.pass_obj
@handle_errors
def dead(obj: Ctx, queue_name: str | None, limit: int, as_json: bool) -> None:
    """List dead letters, oldest first: ids, actor, retries and the error (no payload).

    The error is its type name and, for mnemo's own errors, a reason that names ids only
    (e.g. the turn uid reused with different content), never memory text.

    Example:

        mnemo queue dead --queue turns
    """
    with _admin(obj) as broker:
        letters = broker.dead_letters(queue_name, limit=limit)
    if as_json:
        emit_json([asdict(d) for d in letters])
        return
    if not letters:
        click.echo("no dead letters")
        return
    emit_table(["queue", "message id", "actor", "retries", "dead at", "error"],
               [[d.queue, d.message_id, d.actor, d.retries,
                 show_time(d.dead_at) or "-",
                 _error(d.last_error, d.reason)] for d in letters])


def _error(last_error: str | None, reason: str | None) -> str:
    return f"{last_error or '-'}: {reason}" if reason else (last_error or "-")


@queue.command()
@queue_option
@click.option("--message-id", "message_ids", multiple=True, metavar="ID",
              help="Only this message (repeatable; default: every dead letter).")
@json_option
@click.pass_obj
@handle_errors
def requeue(obj: Ctx, queue_name: str | None, message_ids: tuple[str, ...],
            as_json: bool) -> None:
    """Put dead letters back on their queues with a fresh retry budget.

    Safe to repeat: actors are idempotent, and a requeued message is no longer dead.

    Example:

        mnemo queue requeue --queue turns
    """
    with _admin(obj) as broker:
        count = broker.requeue_dead(queue_name, message_ids)
    if as_json:
        emit_json({"requeued": count})
    else:
        click.echo(f"requeued {count} message(s)")


@queue.command()
@queue_option
@click.option("--all", "include_waiting", is_flag=True,
              help="Also drop messages waiting to run (ready or delayed), not only dead ones.")
@click.option("--yes", is_flag=True, help="Confirm the deletion.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@json_option
@click.pass_obj
@handle_errors
def purge(obj: Ctx, queue_name: str | None, include_waiting: bool, yes: bool, dry_run: bool,
          as_json: bool) -> None:
    """Delete dead letters (with --all, waiting messages too). Needs --yes or --dry-run.

    Messages in flight are never purged. Purging waiting turns loses them: prefer
    `mnemo queue requeue` for dead letters you want to keep.

    Example:

        mnemo queue purge --queue consolidate --dry-run
    """
    if not yes and not dry_run:
        raise click.ClickException(
            "purge deletes messages: pass --yes to confirm, or --dry-run to count them first")
    with _admin(obj) as broker:
        count = broker.purge(queue_name, include_waiting=include_waiting, dry_run=dry_run)
    if as_json:
        emit_json({"purged": 0 if dry_run else count, "would_purge": count if dry_run else 0})
    elif dry_run:
        click.echo(f"would purge {count} message(s)")
    else:
        click.echo(f"purged {count} message(s)")
