"""``mnemo queue verify``: end-to-end completeness of the post-turn work (on the queue group).

Reads the recorded turns (``memory_core.write.completeness``) and, on Redis, the turn journal
(``memory_core.brokers.journal``); with ``--repair`` re-sends what is missing under the ids
the pipeline uses, so nothing still queued is doubled.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click

from memory_core.clock import to_db, utcnow
from memory_core.db import open_ops, open_state
from memory_core.mirrors.outbox import configured_mirrors
from memory_core.settings import Settings
from memory_core.write.completeness import FOLLOW_UPS, CompletenessReport, check_completeness
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.queue import _admin, queue


def _journal(settings: Settings, state: Any, broker: Any | None,
             resend_s: float) -> dict[str, int] | None:
    """The journal's counts (Redis only); with ``broker``, relay it once first, re-sending
    the unrecorded turns sent more than ``resend_s`` ago."""
    if settings.broker_kind != "redis":
        return None
    from dataclasses import asdict

    from memory_core.brokers.journal import Journal, journal_status, relay_journal

    ops = open_ops(settings)
    try:
        journal = Journal(ops)
        out: dict[str, int] = {}
        if broker is not None:
            out.update({f"relay_{k}": v for k, v in asdict(relay_journal(
                broker, journal, state.conn, resend_s=resend_s)).items()})
        out.update(journal_status(journal, state.conn, resend_s=resend_s))
        return out
    finally:
        ops.close()


def _check(settings: Settings, grace_s: int, max_turns: int, broker: Any | None,
           resend_s: float) -> tuple[CompletenessReport, dict[str, int] | None]:
    state = open_state(settings, migrate=False, readonly=True)
    ops = open_ops(settings)
    try:
        found = check_completeness(
            state.conn, before=to_db(utcnow() - timedelta(seconds=grace_s)),
            max_turns=max_turns, offer=None if broker is None else broker.enqueue_once,
            ops=ops.conn, mirrors=configured_mirrors(settings))
        return found, _journal(settings, state, broker, resend_s)
    finally:
        ops.close()
        state.close()


@queue.command()
@click.option("--repair", is_flag=True,
              help="Re-send the missing follow-ups (and, on Redis, the journal's lost turns).")
@click.option("--grace", "grace_s", type=click.IntRange(0, 7 * 86_400), default=None,
              help="Skip turns recorded in the last S seconds (default "
              "MNEMO_COMPLETENESS_GRACE_S); on Redis, journal entries older than S count as "
              "overdue (default MNEMO_TURN_JOURNAL_RESEND_S). Use 0 only once the queue is "
              "drained.")
@click.option("--max-turns", type=click.IntRange(1, 1_000_000_000), default=None,
              help="Most turns read, newest first (default MNEMO_COMPLETENESS_MAX_TURNS).")
@json_option
@click.pass_obj
@handle_errors
def verify(obj: Ctx, repair: bool, grace_s: int | None, max_turns: int | None,
           as_json: bool) -> None:
    """Check that every recorded turn had each follow-up its pipeline owes.

    Per follow-up (extract_beliefs, ego_anchor, micro_consolidate, ship_changes): how many
    recorded turns miss it. "held" counts re-sends the broker kept out because the same
    message is still queued, in flight or dead (pending or dead, not lost: see `mnemo queue
    dead`). On Redis, also the turn journal: turns after_turn sent that no worker has
    recorded yet ("overdue": longer than MNEMO_TURN_JOURNAL_RESEND_S). Exit 0 when nothing
    is missing (or --repair re-sent it), 1 when something is missing and was not re-sent.

    Example:

        mnemo queue verify --repair
    """
    s = obj.settings
    grace = s.completeness_grace_s if grace_s is None else grace_s
    limit = s.completeness_max_turns if max_turns is None else max_turns
    resend = s.turn_journal_resend_s if grace_s is None else grace_s
    if repair:
        with _admin(obj) as broker:
            found, journal = _check(s, grace, limit, broker, resend)
    else:
        found, journal = _check(s, grace, limit, None, resend)
    _show(found, journal, repair, as_json)
    unresolved = found.missing_total - (sum(found.requeued.values()) + found.held
                                        if repair else 0)
    overdue = (journal or {}).get("overdue", 0) if not repair else 0
    if unresolved or overdue:
        raise click.exceptions.Exit(1)


def _show(found: CompletenessReport, journal: dict[str, int] | None, repair: bool,
          as_json: bool) -> None:
    if as_json:
        emit_json({"scanned": found.scanned, "truncated": found.truncated,
                   "missing": found.missing, "requeued": found.requeued, "held": found.held,
                   "repair": repair, "journal": journal,
                   "gaps": [{"tenant": g.tenant, "turn_uid": g.turn_uid, "job": g.job}
                            for g in found.gaps[:100]]})
        return
    more = " (stopped at --max-turns)" if found.truncated else ""
    click.echo(f"turns checked: {found.scanned}{more}")
    emit_table(["follow-up", "missing", "re-sent"],
               [[job, found.missing[job], found.requeued[job] if repair else "-"]
                for job in FOLLOW_UPS])
    if repair and found.held:
        click.echo(f"held: {found.held} still queued, in flight or dead (see `mnemo queue "
                   "dead`)")
    if journal is not None:
        click.echo(f"journal: {journal['entries']} entries, {journal['unrecorded']} not "
                   f"recorded yet, {journal['overdue']} overdue"
                   + (f"; re-sent {journal['relay_resent']}" if repair else ""))
