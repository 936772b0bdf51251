"""Helpers for the post-turn tests: a worker context on tmp files, turns, table snapshots,
and a driver that runs the real actors on captured messages without a worker."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dramatiq import Message
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import CurrentMessage

from memory_core import Memory
from memory_core.brokers import make_broker
from memory_core.chat.post_turn import turn_message
from memory_core.db import migrate_stores, open_state
from memory_core.errors import NotFoundError
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from tests.helpers.queue_env import wait_for
from workers.actors import declare_actors, follow_up_id
from workers.audit import take_reported
from workers.context import LazyContext, WorkerContext
from workers.pool import WorkerPool

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
PLACES = ("Lisbon", "Berlin", "Osaka", "Porto")
TEXTS = ("My name is Sam.", "I live in {place} now.", "My sister Ana works at Acme.",
         "I have a dog named Rex.", "I really love jazz.", "Ana lives in {place}.",
         "Can you suggest a quick dinner?", "I have a dog named Rex.")


def make_context(data_dir: Path, tenants: tuple[str, ...] = ("t1",), **overrides: Any
                 ) -> WorkerContext:
    settings = Settings.from_env({}, data_dir=data_dir, hash_dim=32, **overrides)
    ctx = WorkerContext.open(settings)
    for tenant in tenants:
        create_tenant(ctx.state.conn, tenant)
    return ctx


def seed_tenants(settings: Settings, tenants: tuple[str, ...] = ("t1",)) -> None:
    """Migrate both stores of ``settings`` and create ``tenants``, as ``mnemo`` setup would."""
    migrate_stores(settings)
    state = open_state(settings)
    try:
        for tenant in tenants:
            create_tenant(state.conn, tenant)
    finally:
        state.close()


def turn(i: int, tenant: str = "t1", session: str | None = None) -> dict[str, Any]:
    """Turn ``i``: six a session (``s0``, ``s1``...) a day apart unless ``session`` is given."""
    text = TEXTS[i % len(TEXTS)].format(place=PLACES[(i // len(TEXTS)) % len(PLACES)])
    when = T0 + timedelta(days=i // 6, minutes=i)
    return {"tenant": tenant, "session_id": session or f"s{i // 6}", "turn_uid": f"u{i:04d}",
            "speaker": "user", "text": text, "occurred_at": when.isoformat(),
            "index": i % 6 if session is None else i}


def record_messages(settings: Settings, turns: list[dict[str, Any]]) -> list[Message[Any]]:
    """The record_turn messages ``after_turn`` would send for ``turns``."""
    state = open_state(settings)
    try:
        return [turn_message(state.conn, t) for t in turns]
    finally:
        state.close()


TABLES: dict[str, str] = {
    "turns": "SELECT tenant, turn_uid, session_id, idx, speaker, occurred_at, text FROM turns",
    # The turn pointers sorted: episode_turns rows are inserted in arrival order.
    "episodes": "SELECT e.tenant, e.episode_uid, e.session_id, e.tier, e.text, e.occurred_at, "
                "e.importance, (SELECT group_concat(t.turn_uid, ',' ORDER BY t.turn_uid) FROM "
                "episode_turns et JOIN turns t ON t.id = et.turn_id WHERE et.episode_id = e.id) "
                "FROM episodes e",
    "beliefs": "SELECT tenant, belief_uid, subject_id, predicate, object_text, object_norm, "
               "object_entity_id, text, valid_from, valid_to, stated_valid_to, status, "
               "source, confidence, turn_uid, negated FROM beliefs",
    "entities": "SELECT tenant, entity_id, name, kind, belief_count, graph_degree "
                "FROM entities",
    # What the idempotency keys guard: a re-applied extraction would count its rejected
    # candidates again, a lost claim would leave its key out. ``last_at`` and ``applied_at``
    # are system time (when the write ran), so they are left out like ``recorded_at``.
    "hygiene_rejections": "SELECT tenant, reason, count FROM hygiene_rejections",
    "applied_jobs": "SELECT key FROM applied_jobs",
}
# A candidate the heuristic extractor draws and the write refuses (its deadline is before the
# turn): one ``invalid_candidate`` in hygiene_rejections per extraction of the turn.
REFUSED_TEXT = "I promised to call Ana by last Monday."


def outbox_rows(conn: Any) -> list[tuple[Any, ...]]:
    """The outbox in order, without row ids and ``created_at`` (system time)."""
    return conn.execute("SELECT tenant, kind, object_id, op FROM outbox ORDER BY id").fetchall()


def mirrored(conn: Any) -> list[tuple[Any, ...]]:
    """What a mirror that applied the outbox in order holds: each object whose last change
    is an upsert.

    Not the rows themselves: the rows record the changes on the way, and those depend on
    arrival order (a belief that arrives before an older one of its slot is written active,
    then closed; an ego anchor can be added and dropped again), while the end state must not.
    """
    last = {(tenant, kind, obj): op for tenant, kind, obj, op in outbox_rows(conn)}
    return sorted(key for key, op in last.items() if op == "upsert")


def snapshot(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The memory tables, the idempotency bookkeeping and what the mirrors get, without row
    ids and system time (which depend on arrival order)."""
    tables = {name: sorted(conn.execute(sql).fetchall(), key=repr)
              for name, sql in TABLES.items()}
    return {**tables, "outbox": mirrored(conn)}


@dataclass
class Driver:
    """Runs the real actors (``declare_actors``) on messages, without a worker: every
    message an actor enqueues is captured instead of delivered. ``inline``: the queues whose
    inline follow-ups run in their parent's message (None: all; ``()``: every follow-up is a
    message, the path a failed inline step and the completeness check take)."""

    ctx: WorkerContext
    inline: tuple[str, ...] | None = None
    broker: StubBroker = field(default_factory=StubBroker)
    sent: list[Message[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        declare_actors(self.broker, LazyContext.of(self.ctx), inline=self.inline)
        self.broker.enqueue = self._capture  # type: ignore[method-assign]

    def _capture(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        self.sent.append(message)
        return message

    def deliver(self, message: Message[Any]) -> list[Message[Any]]:
        """Run one delivery; the follow-ups it enqueued."""
        before = len(self.sent)
        token = CurrentMessage._MESSAGE.set(message)
        try:
            self.broker.actors[message.actor_name].fn(**message.kwargs)
        finally:
            CurrentMessage._MESSAGE.reset(token)
            take_reported()
        return self.sent[before:]

    def run_fifo(self, messages: list[Message[Any]]) -> list[Message[Any]]:
        """A clean run: every message once, follow-ups after their parent; all messages."""
        queue, seen = list(messages), []
        while queue:
            message = queue.pop(0)
            seen.append(message)
            queue.extend(self.deliver(message))
        return seen


def replay_twice_shuffled(driver: Driver, messages: list[Message[Any]],
                          rng: random.Random) -> int:
    """Deliver every message twice in random order. A message becomes deliverable once its
    parent was delivered (it does not exist before); one whose turn is not recorded yet
    fails and is retried later, as Retries would. Returns the deliveries made."""
    children: dict[str, list[Message[Any]]] = {}
    for parent, follow in _parents(messages):
        children.setdefault(parent, []).append(follow)
    roots = [m for m in messages if m.actor_name == "record_turn"]
    ready = [m for m in roots for _ in range(2)]
    released: set[str] = set()
    deliveries = 0
    while ready:
        message = ready.pop(rng.randrange(len(ready)))
        try:
            driver.deliver(message)
        except NotFoundError:
            ready.append(message)
            continue
        deliveries += 1
        if message.message_id not in released:
            released.add(message.message_id)
            ready.extend(c for c in children.get(message.message_id, []) for _ in range(2))
    return deliveries


_CHILDREN = {"record_turn": ("extract_beliefs",),
             "extract_beliefs": ("ego_anchor", "micro_consolidate", "ship_changes")}


def _parents(messages: list[Message[Any]]) -> Iterator[tuple[str, Message[Any]]]:
    by_id = {m.message_id: m for m in messages}
    for parent in messages:
        kw = parent.kwargs
        uid = kw["turn"]["turn_uid"] if "turn" in kw else kw.get("turn_uid")
        for job in _CHILDREN.get(parent.actor_name, ()):
            payload = {"tenant": kw["tenant"], "turn_uid": uid} if job != "ship_changes" else {}
            child_id = follow_up_id(parent.message_id, job, payload)
            if child_id in by_id:
                yield parent.message_id, by_id[child_id]


@contextmanager
def closing(*contexts: WorkerContext) -> Iterator[None]:
    try:
        yield
    finally:
        for ctx in contexts:
            ctx.close()


def counts(conn: Any, *tables: str) -> Callable[[], dict[str, int]]:
    return lambda: {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def through_a_pool(settings: Settings, state_conn: Any, turns: list[dict[str, Any]], *,
                   processes: int, threads: int, timeout_s: float = 60
                   ) -> tuple[WorkerPool, list[str]]:
    """``after_turn`` each of ``turns`` in this process and let a real worker pool (the
    embedded queue) record them until every queue is empty; returns the stopped pool and the
    message ids."""
    pool = WorkerPool(settings, processes=processes, threads=threads, grace_s=5)
    pool.start()
    broker = make_broker(settings)
    try:
        with Memory.open(settings) as mem:
            ids = [mem.after_turn(t) for t in turns]
        wait_for(lambda: state_conn.execute("SELECT count(*) FROM turns").fetchone()[0]
                 == len(turns), timeout_s, 0.1)
        wait_for(lambda: all(s.ready == s.delayed == s.in_flight == 0
                             for s in broker.queue_stats()), timeout_s, 0.1)
    finally:
        pool.stop()
        broker.close()
    return pool, ids
