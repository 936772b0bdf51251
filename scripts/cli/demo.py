"""``mnemo demo``: the whole pipeline on a small bundled conversation, in a temporary
directory, with a real worker pool on the embedded broker; then a few recalls, explained."""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import click

from memory_core import Memory
from memory_core.brokers import make_broker
from memory_core.chat.post_turn import parse_turn_lines, turn_payload
from memory_core.db import migrate_stores, open_state
from memory_core.errors import MnemoError
from memory_core.log import configure_logging
from memory_core.model.tenants import create_tenant
from memory_core.recall import RecallResult
from memory_core.settings import Settings
from scripts.cli.app import Ctx, emit_json, handle_errors, json_option, progress
from scripts.cli.dates import show_day
from workers.pool import WorkerPool

TENANT = "demo"
# (question, as_of): the last one asks what was true at an earlier world time.
QUESTIONS: tuple[tuple[str, str | None], ...] = (
    ("Which city do I live in now?", None),
    ("What is my dog called?", None),
    ("What do I plan to hike in May?", "2024-04-20T00:00:00Z"),
    ("Where did I work?", "2024-03-05T00:00:00Z"),
)
COUNTED = ("turns", "episodes", "beliefs", "entities")


def demo_turns() -> list[dict[str, Any]]:
    """The bundled conversation's turns, as the mappings a chat process hands to after_turn."""
    text = resources.files("memory_core").joinpath("data/demo_conversation.jsonl").read_text(
        encoding="utf-8")
    return [turn_payload(t) for t in parse_turn_lines(text.splitlines(), default_tenant=TENANT)]


def wait_drained(settings: Settings, timeout_s: float) -> float:
    """Wait until no message is ready, delayed or in flight; seconds waited. Raises
    MnemoError on a dead letter or the timeout."""
    broker = make_broker(settings)
    started = time.monotonic()
    try:
        while True:
            stats = broker.queue_stats()
            if any(s.dead for s in stats):
                raise MnemoError("a demo message was dead-lettered: see `mnemo queue dead`")
            if all(s.ready == s.delayed == s.in_flight == 0 for s in stats):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise MnemoError(f"the queue did not drain within {timeout_s:.0f} s")
            time.sleep(0.1)
    finally:
        broker.close()


def _counts(mem: Memory) -> dict[str, int]:
    conn = mem.state_db.conn
    return {t: conn.execute(f"SELECT count(*) FROM {t} WHERE tenant = ?",
                            (TENANT,)).fetchone()[0] for t in COUNTED}


def _why(components: dict[str, float]) -> str:
    top = sorted(components.items(), key=lambda kv: -abs(kv[1]))[:4]
    return ", ".join(f"{k}={v:.3f}" for k, v in top)


def _show(question: str, as_of: str | None, result: RecallResult, top: int) -> None:
    when = f" (as of {show_day(as_of)})" if as_of else ""
    click.echo(f"\nQ: {question}{when}")
    if not result.items and not result.facts:
        click.echo("   (nothing recalled)")
    if result.facts:
        click.echo("   facts:")
    for fact in result.facts[:top]:
        until = f" until {show_day(fact.valid_to)}" if fact.valid_to else ""
        before = f" (before: {', '.join(fact.superseded)})" if fact.superseded else ""
        click.echo(f"   {fact.label} fact: {fact.text}{before}")
        click.echo(f"       since {show_day(fact.valid_from) or '?'}{until}, confidence "
                   f"{fact.confidence:.2f}, stated by {fact.source}; score {fact.score:.3f} "
                   f"({_why(fact.components)}); from turn(s) {', '.join(fact.turn_uids) or '-'}")
    if result.items:
        click.echo("   evidence:")
    for item in result.items[:top]:
        status = f", {item.status}" if item.status and item.status != "active" else ""
        click.echo(f"   {item.label} {item.kind}{status}: {item.text}")
        click.echo(f"       score {item.score:.3f} ({_why(item.components)}); "
                   f"from turn(s) {', '.join(item.turn_uids) or '-'}")
    flags = " keyword-only: " + str(result.degraded_reason) if result.keyword_only else ""
    click.echo(f"   [{len(result.facts)} fact(s), {len(result.items)} evidence item(s), strategy "
               f"{result.strategy}, recall log "
               f"#{result.log_id}{flags}]")


def run_demo(settings: Settings, *, processes: int, timeout_s: float, top: int,
             as_json: bool = False) -> None:
    turns = demo_turns()
    migrate_stores(settings)  # set-up, as `mnemo db migrate`: Memory.open only checks
    state = open_state(settings, migrate=False)
    create_tenant(state.conn, TENANT)
    state.close()
    pool = WorkerPool(settings, processes=processes, threads=2, grace_s=5)
    say = (lambda _: None) if as_json else progress  # --json: stdout is the one report
    say(f"mnemo demo: data in {settings.data_dir}; starting {processes} worker "
        "process(es) on the embedded broker")
    pool.start()
    try:
        with Memory.open(settings) as mem:
            started = time.perf_counter()
            for turn in turns:
                mem.after_turn(turn)
            enqueue_ms = (time.perf_counter() - started) * 1000
            say(f"enqueued {len(turns)} turns with after_turn in {enqueue_ms:.1f} ms; "
                "waiting for the workers")
            waited = wait_drained(settings, timeout_s)
            counts = _counts(mem)
            answers = [(question, as_of, mem.recall(question, tenant=TENANT, as_of=as_of))
                       for question, as_of in QUESTIONS]
    finally:
        pool.stop()
    if as_json:
        emit_json({"turns": len(turns), "enqueue_ms": round(enqueue_ms, 1),
                   "processed_s": round(waited, 2), "counts": counts,
                   "questions": [{"question": q, "as_of": as_of, "recall": result.to_dict()}
                                 for q, as_of, result in answers]})
        return
    click.echo(f"processed in {waited:.1f} s: " + ", ".join(
        f"{n} {t}" for t, n in counts.items()))
    for question, as_of, result in answers:
        _show(question, as_of, result, top)


@click.command()
@click.option("--processes", type=click.IntRange(1, 8), default=2, show_default=True,
              help="Worker processes to start.")
@click.option("--timeout", type=click.FloatRange(1, 3600), default=120, show_default=True,
              help="Seconds to wait for the queue to drain.")
@click.option("--top", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Recalled facts, and evidence items, shown per question.")
@json_option
@click.pass_obj
@handle_errors
def demo(obj: Ctx, processes: int, timeout: float, top: int, as_json: bool) -> None:
    """Run the whole pipeline on a small bundled conversation and show recall.

    Uses a fresh temporary data directory (deleted afterwards) and the embedded broker, so
    it needs no server and leaves your MNEMO_DATA_DIR alone: starts a real worker pool,
    hands 30 turns of three chat sessions to after_turn, waits for the queue to drain, then
    asks a few questions and prints the recalled facts (current beliefs, best first) and
    evidence (episodes and turns) with their score components. With --json: one JSON
    object (counts, and each question's full recall result) on stdout, nothing on stderr.

    Example:

        mnemo demo
    """
    with tempfile.TemporaryDirectory(prefix="mnemo-demo-") as tmp:
        settings = Settings(data_dir=Path(tmp), log_format=obj.settings.log_format,
                            log_level="error")
        configure_logging(settings, force=True)  # quiet: the report is the output
        run_demo(settings, processes=processes, timeout_s=timeout, top=top,
                 as_json=as_json)
