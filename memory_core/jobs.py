"""The job contract: every background job's actor name, queue, payload and policy, once.

The chat process enqueues by name through ``build_message()`` and never imports ``workers/``;
the workers declare one actor per job with ``Job.actor_options()``. A test checks that every
job here has exactly one actor on the same queue, and every actor a job.

The eight schedule jobs (macro_sleep, backup, global_reconsolidation, commitment_gc,
session_purge, daily_digest, firing_ledger, restore_drill) are on queue ``maintenance``. Each
takes ``window``, the firing's window key (``memory_core.maintenance.firings``);
global_reconsolidation also takes its partition chain (run_id, partition, partitions), which
its first firing leaves out. They never age out: a window's message runs, however late.

Policy, per job: ``max_retries`` then a dead letter; exponential backoff between
``min_backoff_ms`` and ``max_backoff_ms`` (Dramatiq's Retries middleware); ``time_limit_ms``
(TimeLimit); ``max_age_ms`` — stale low-value work ages out (acked and logged as skipped),
``None`` means never (turns never age out); ``priority`` — lower runs first inside a worker.
Messages carry ids and small values plus the turn itself, never derived text.

``inline`` (extract_beliefs, ego_anchor, micro_consolidate): the worker that runs a turn's
step runs this follow-up in the same message, right after it, instead of queueing it (one
message per turn instead of three or four: each message costs an insert, a lease, an ack and
an audit transaction in ``memory_ops.db``, more CPU than the steps). Each step keeps its own
transaction and idempotency key, so a crash between two steps loses nothing: the parent is
not acked, comes back, and the steps already done find their keys. A follow-up whose inline
run raises is queued as its own message (its own retries, backoff and dead letter), and the
completeness check re-sends lost ones as messages too: the job stays a job with its actor.
record_turn's time limit covers its own step plus the whole chain.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from dramatiq import Message

from memory_core.errors import InvalidInputError

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

# A message carries ids, small values and at most one turn (at most MNEMO_MAX_TURN_CHARS, which
# Dramatiq's JSON encoder may escape to 6 bytes a character). Anything bigger is a bug.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Job:
    """One background job: its actor, queue, payload keys and retry/time/age policy."""

    name: str  # the Dramatiq actor name
    queue: str
    params: tuple[str, ...]  # required keyword arguments
    optional: tuple[str, ...] = ()
    max_retries: int = 5
    time_limit_ms: int = 60 * SECOND
    min_backoff_ms: int = 1 * SECOND
    max_backoff_ms: int = 5 * MINUTE
    max_age_ms: int | None = None
    priority: int = 0
    inline: bool = False  # run in its parent's message (see the module docstring)
    doc: str = field(default="", compare=False)

    def actor_options(self) -> dict[str, Any]:
        """Keyword arguments for ``dramatiq.actor`` (options the default middleware read)."""
        options: dict[str, Any] = {
            "actor_name": self.name,
            "queue_name": self.queue,
            "priority": self.priority,
            "max_retries": self.max_retries,
            "time_limit": self.time_limit_ms,
            "min_backoff": self.min_backoff_ms,
            "max_backoff": self.max_backoff_ms,
        }
        if self.max_age_ms is not None:
            options["max_age"] = self.max_age_ms
        return options


# The job after_turn sends (by name: memory_core.chat.post_turn; the turn journal keeps it).
RECORD_TURN = "record_turn"

_TURN_CHAIN = (
    Job("extract_beliefs", "turns", ("tenant", "turn_uid"), max_retries=10,
        time_limit_ms=2 * MINUTE, min_backoff_ms=2 * SECOND, max_backoff_ms=10 * MINUTE,
        priority=10, inline=True, doc="Extract beliefs from a recorded turn and apply them."),
    Job("ego_anchor", "turns", ("tenant", "turn_uid"), ("subject_ids",), max_retries=10,
        time_limit_ms=60 * SECOND, min_backoff_ms=2 * SECOND, max_backoff_ms=10 * MINUTE,
        priority=20, inline=True, doc="Link the turn's subjects to the tenant's hub entity."),
    Job("micro_consolidate", "consolidate", ("tenant", "session_id"),
        ("turn_uid", "subject_ids"), max_retries=3, time_limit_ms=2 * MINUTE,
        min_backoff_ms=5 * SECOND, max_backoff_ms=5 * MINUTE, max_age_ms=30 * MINUTE,
        priority=50, inline=True, doc="Merge near-duplicate working episodes, dedupe the "
        "touched subjects' beliefs, refresh their counts. Ages out: macro_sleep catches up."),
)
_RECORD_LIMIT_MS = 60 * SECOND

_POST_TURN = (
    # Its time limit covers its own step and the inline chain after it.
    Job(RECORD_TURN, "turns", ("tenant", "turn"), max_retries=10,
        time_limit_ms=_RECORD_LIMIT_MS + sum(job.time_limit_ms for job in _TURN_CHAIN),
        min_backoff_ms=1 * SECOND, max_backoff_ms=10 * MINUTE, priority=0,
        doc="Record the raw turn and its working episode (idempotent on turn_uid), then "
        "run its extraction, anchoring and consolidation inline."),
    *_TURN_CHAIN,
    Job("ship_changes", "mirrors", ("tenant",), max_retries=5, time_limit_ms=5 * MINUTE,
        min_backoff_ms=5 * SECOND, max_backoff_ms=15 * MINUTE, max_age_ms=1 * HOUR,
        priority=80, doc="Ship the change outbox to the configured mirrors (cursor-based: a "
        "later run ships whatever an aged-out one did not)."),
)

MAINTENANCE = "maintenance"


def _maintenance(name: str, time_limit_ms: int, doc: str, *, max_retries: int = 3,
                 optional: tuple[str, ...] = ()) -> Job:
    # Long backoff: a failed maintenance run usually waits on a lock or the disk, not a blip.
    return Job(name, MAINTENANCE, ("window",), optional, max_retries=max_retries,
               time_limit_ms=time_limit_ms, min_backoff_ms=30 * SECOND,
               max_backoff_ms=30 * MINUTE, priority=100, doc=doc)


_SCHEDULED = (
    _maintenance("macro_sleep", 30 * MINUTE, "Decay and tier moves, reinforcement from the "
                 "recall log, ego-anchor backfill, FTS drift check."),
    _maintenance("backup", 60 * MINUTE, "Online backups of both databases with a manifest, "
                 "per-tenant exports, retention.", max_retries=2),
    _maintenance("global_reconsolidation", 30 * MINUTE, "One partition (by subject hash) of "
                 "the daily dedupe / re-embed / recount; chains the next partition.",
                 max_retries=5, optional=("run_id", "partition", "partitions")),
    _maintenance("commitment_gc", 5 * MINUTE, "Expire commitments and pending-review items "
                 "past their time to live."),
    _maintenance("session_purge", 30 * MINUTE, "Purge working-tier material of ended "
                 "sessions; the retention/expiry sweep."),
    _maintenance("daily_digest", 15 * MINUTE, "Per tenant: what memory learned, changed and "
                 "dropped that day."),
    _maintenance("firing_ledger", 5 * MINUTE, "The week's firings, misses, failures and "
                 "durations per schedule; prunes the ledger."),
    _maintenance("restore_drill", 60 * MINUTE, "Restore the latest backup into scratch and "
                 "check it against its manifest.", max_retries=2),
)

JOBS: dict[str, Job] = {job.name: job for job in (*_POST_TURN, *_SCHEDULED)}

QUEUES: tuple[str, ...] = tuple(sorted({job.queue for job in JOBS.values()}))


def get_job(name: str) -> Job:
    """The job named ``name``; InvalidInputError listing the known jobs otherwise."""
    try:
        return JOBS[name]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"unknown job {name!r}: the jobs are {', '.join(sorted(JOBS))}"
        ) from None


def check_payload(job: Job, kwargs: dict[str, Any]) -> None:
    """Raise InvalidInputError when ``kwargs`` misses a required key or has an unknown one."""
    missing = [p for p in job.params if p not in kwargs]
    unknown = sorted(set(kwargs) - set(job.params) - set(job.optional))
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown {', '.join(unknown)}")
        allowed = ", ".join(job.params + tuple(f"[{o}]" for o in job.optional))
        raise InvalidInputError(f"job {job.name}: {'; '.join(parts)}: it takes {allowed}")


# The namespace of derived message ids; changing it would make every resent turn a new message.
_DERIVED_ID_NS = uuid.UUID("8f3b6c2e-1d4a-5e7f-9b0c-6d6e656d6f31")


def derived_message_id(job_name: str, *parts: str) -> str:
    """A message id derived from the job and ``parts`` (uuid5): the same job and parts give
    the same id on every host and every send, which is what lets the brokers keep one message
    when the same work is sent twice. ``parts`` are encoded as a JSON list, so ids that
    contain separators cannot collide."""
    return str(uuid.uuid5(_DERIVED_ID_NS, json.dumps([job_name, *parts], separators=(",", ":"))))


def applied_key(kind: str, tenant: str, turn_uid: str, extra: str = "") -> str:
    """The ``applied_jobs`` key (state db) a turn's step writes with its effect:
    ``<kind>:<tenant>:<turn_uid>[:<extra>]`` (``memory_core.write.pipeline``); the turn
    journal and the completeness check read them."""
    return f"{kind}:{tenant}:{turn_uid}" + (f":{extra}" if extra else "")


# The namespace of follow-up ids (was workers.actors'; unchanged, so ids stay the same).
_FOLLOW_UP_NS = uuid.UUID("5d0c1a52-3f0e-4e8b-9a55-6d6e656d6f21")


def turn_job_id(job_name: str, tenant: str, turn_uid: str) -> str:
    """The id of a turn's follow-up ``job_name`` (extract_beliefs, ego_anchor,
    micro_consolidate): one per job and turn, whoever sends it — the parent step, its
    redelivery, or the completeness check re-sending a lost one
    (``memory_core.write.completeness``) — so a copy still queued is not doubled. A recorded
    turn's content never changes (a reused turn uid is refused), so tenant + uid name it."""
    return derived_message_id(job_name, tenant, turn_uid)


def follow_up_id(parent_id: str, job: str, payload: dict[str, Any] | None = None) -> str:
    """The id of the follow-up ``job`` (with ``payload``) of message ``parent_id``: the same
    on every redelivery of the parent. A per-turn follow-up (its payload names tenant and
    turn_uid) gets ``turn_job_id``; any other is derived from its parent's id."""
    if payload is not None and isinstance(payload.get("turn_uid"), str) and isinstance(
            payload.get("tenant"), str):
        return turn_job_id(job, payload["tenant"], payload["turn_uid"])
    return str(uuid.uuid5(_FOLLOW_UP_NS, f"{parent_id}/{job}"))


def build_message(job_name: str, **kwargs: Any) -> Message[Any]:
    """A Dramatiq message for job ``job_name`` with keyword payload ``kwargs``.

    Pure: builds plain data, touches no broker. The payload must be JSON values (str, int,
    float, bool, None, lists, dicts) under MAX_MESSAGE_BYTES encoded. Raises
    InvalidInputError naming the job and the problem (unknown job, missing or unknown key,
    a value JSON cannot carry, an oversized message); the message never quotes the values.
    """
    job = get_job(job_name)
    check_payload(job, kwargs)
    try:
        size = len(json.dumps(kwargs, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError) as e:
        raise InvalidInputError(
            f"job {job.name}: the payload must be JSON values (str, int, float, bool, None, "
            f"lists, dicts); got {type(e).__name__}: pass ids and ISO-8601 text instead"
        ) from None
    if size > MAX_MESSAGE_BYTES:
        raise InvalidInputError(
            f"job {job.name}: the payload is {size} bytes, over {MAX_MESSAGE_BYTES}: messages "
            "carry ids and small values, not documents"
        )
    return Message(queue_name=job.queue, actor_name=job.name, args=(), kwargs=kwargs,
                   options={})
