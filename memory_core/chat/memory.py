"""``Memory``: what the chat process holds: ``recall()`` before an answer, ``after_turn()``
after it (which only checks the turn and enqueues the post-turn work).

The chat process opens ``memory_state.db`` read-only (it never writes it, not even its schema)
and ``memory_ops.db`` for the recall log (and, on Redis, the spool). Schemas are created and
upgraded by `mnemo db migrate` or the workers at start; ``open`` only checks them and refuses
a database that is missing or behind. Settings are read once, at ``open``.

Example::

    from memory_core import Memory, format_untrusted_block

    with Memory.open() as mem:
        result = mem.recall("where does Ana live?", tenant="default", session_id="chat-1")
        prompt_block = format_untrusted_block(result)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import structlog

from memory_core.chat.post_turn import TurnSender, checked_message, checked_turn
from memory_core.db.stores import Database, open_ops, open_state
from memory_core.embedders.base import Embedder, warn_keyword_grade_once
from memory_core.embedders.factory import make_embedder
from memory_core.log import configure_library_logging
from memory_core.model.tenants import require_tenant
from memory_core.model.turns import TurnInput, is_recorded
from memory_core.recall import engine
from memory_core.recall.fusion import Budget
from memory_core.recall.log_writer import RecallLogWriter
from memory_core.recall.resident import Resident
from memory_core.recall.result import RecallResult
from memory_core.recall.search import TermStats
from memory_core.recall.strategy import RecallStrategy, get_strategy
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex

log = structlog.get_logger(__name__)
T = TypeVar("T")


class Memory:
    """Long-term memory as the chat process sees it. Thread-safe (one connection per thread).

    Build it with ``Memory.open()``; close it with ``close()`` or a ``with`` block.
    """

    def __init__(self, settings: Settings, state: Database, ops: Database,
                 embedder: Embedder) -> None:
        self.settings = settings
        self._state = state
        self._ops = ops
        # The recall log is written by a background thread, off the chat path.
        self._log_writer = RecallLogWriter(ops, settings.recall_log_keep)
        self.embedder = embedder
        self._index = VectorIndex(embedder)
        self._term_stats = TermStats()
        # Tenants' postings, vectors and rows held here, built on a background thread.
        self._resident = (Resident(max_rows=settings.recall_resident_rows,
                                   connect=lambda: state.conn)
                          if settings.recall_resident_rows > 0 else None)
        self._sender = TurnSender(settings)
        self._helper = RecallHelper(state, settings.recall_helper_threads) if (
            settings.recall_helper_threads > 0) else None

    @classmethod
    def open(cls, settings: Settings | None = None, *, embedder: Embedder | None = None,
             warn_keyword_grade: bool = True) -> Memory:
        """Open memory with ``settings`` (default: from the environment).

        ``warn_keyword_grade``: log ``embedder_keyword_grade`` (once per process) when the
        embedder is keyword-grade; `mnemo recall` asks for it only with ``--explain``.

        Never migrates: both databases must exist at this code's schema version, made by
        `mnemo db migrate` or by the workers, which migrate on start. The state db is opened
        read-only; a missing, older or newer database is refused untouched (a missing file
        is not created).

        Raises:
            StoreError: a database is missing or behind (the message names the file and says
                to run `mnemo db migrate`), or cannot be opened.
            SchemaTooNewError: a database was written by a newer mnemo.
            ConfigurationError, EmbedderError: with what to fix.
        """
        settings = settings or Settings.from_env()
        # Its log lines to stderr in MNEMO_LOG_FORMAT, unless the application (or mnemo's
        # CLI) configured logging: never into the application's stdout.
        configure_library_logging(settings)
        embedder = embedder or make_embedder(settings)
        embedder.load()
        state = open_state(settings, migrate=False, readonly=True)
        try:
            # The recall log's writer checkpoints in the background, off the chat path.
            ops = open_ops(settings, migrate=False, autocheckpoint=False)
        except BaseException:
            state.close()
            raise
        if warn_keyword_grade:
            warn_keyword_grade_once(embedder)
        return cls(settings, state, ops, embedder)

    def recall(self, query: str, *, tenant: str | None = None, session_id: str | None = None,
               as_of: datetime | str | None = None, budget: Budget | int | None = None,
               strategy: str | RecallStrategy | None = None,
               now: datetime | None = None, fact_budget: int | None = None) -> RecallResult:
        """What memory holds about ``query`` for ``tenant``: facts, then evidence.

        ``result.facts`` are the beliefs valid now that answer the query (subject,
        predicate, object, valid-from, confidence, who stated it, the turn it came from,
        the earlier values it replaced), best first: the query's subject and predicate
        ("where do I live" -> the user's ``lives_in``) rank first; a superseded belief is
        never among them. At most ``fact_budget`` (default MNEMO_RECALL_FACT_BUDGET, 8; 0:
        none); their handles are ``[1]..[k]``. ``result.items`` are the evidence, episodes
        and raw turns (never beliefs), best first within ``budget`` (a
        ``Budget(items, tokens)`` or an item count, default from settings), handles
        ``[k+1]..``. ``format_untrusted_block(result)`` renders both for the prompt.

        ``session_id`` favours the caller's chat session; ``as_of`` (aware datetime or
        ISO text) asks what was valid at that world time, as memory knows it now: the
        facts are the beliefs valid then (superseded since included, each with its
        ``valid_to``; withdrawn ones never), the evidence what was said by then. The
        explanation goes to the recall log (query digest only), written in the background:
        ``result.log_id`` names its row and ``flush_recall_log()`` waits for it (None: the
        row could not be made or queued; a warning says why). Never
        fails on store trouble: dense search off gives ``keyword_only=True`` with
        ``degraded_reason``.

        Raises:
            InvalidInputError: the query is not a str or is over MNEMO_MAX_QUERY_CHARS, or
                another argument is malformed.
            UnknownTenantError: the tenant does not exist (`mnemo tenant add`), as for
                ``after_turn``. Nothing else.
        """
        strat = get_strategy(strategy)
        resolved = engine.resolve_budget(budget, self.settings.recall_max_items,
                                         self.settings.recall_max_tokens)
        facts = engine.resolve_fact_budget(fact_budget, self.settings.recall_fact_budget)
        result, explanation = engine.recall(
            self._state.conn, self._index, query=query,
            tenant=tenant if tenant is not None else self.settings.default_tenant,
            strategy=strat, max_query_chars=self.settings.max_query_chars, budget=resolved,
            session_id=session_id, as_of=as_of, now=now, stats=self._term_stats,
            helper=self._helper, fact_budget=facts, resident=self._resident)
        body = _explanation_text(explanation, result.tenant)
        log_id = None if body is None else self._log_writer.submit(
            result.tenant, result.query_digest, result.strategy, body)
        log.info("recall", tenant=result.tenant, facts=len(result.facts),
                 items=len(result.items), keyword_only=result.keyword_only, duration_ms=round(
                     result.timings_ms.get("total_ms", 0.0), 2), outcome="ok")
        return result if log_id is None else _with_log_id(result, log_id)

    def flush_recall_log(self) -> None:
        """Wait until the recall log holds every recall made so far (it is written in the
        background; ``close`` flushes too)."""
        self._log_writer.flush()

    def after_turn(self, turn: TurnInput | Mapping[str, Any]) -> str:
        """Hand a finished turn to the workers; returns the message id at once.

        ``turn``: a ``TurnInput`` or a mapping of its fields (tenant, session_id, turn_uid,
        speaker, text, occurred_at, optional index). Only checks and enqueues (the
        ``record_turn`` job); the workers record it, extract beliefs, anchor and
        consolidate. On Redis, an unreachable server means the message is spooled locally
        and relayed later: this never raises because a broker is down.

        Idempotent: the message id is derived from the tenant, turn uid and content, so the
        same turn again returns the same id and is one message (a turn already recorded is
        not sent again; one still queued is not queued twice).

        Raises:
            InvalidInputError: a field is malformed (the message names it and the fix), or
                the turn_uid is already recorded with different content.
            UnknownTenantError: the tenant does not exist (`mnemo tenant add`).
            BrokerError: nothing could keep the message (the queue or spool file cannot
                be written).
        """
        conn = self._state.conn
        t = checked_turn(turn, self.settings.max_turn_chars)
        require_tenant(conn, t.tenant)
        message = checked_message(t)
        # Already recorded: nothing to send (its id names the message that recorded it).
        if not is_recorded(conn, t):
            self._sender.offer(message)
        return message.message_id

    @property
    def ops_db(self) -> Database:
        return self._ops

    @property
    def state_db(self) -> Database:
        return self._state

    def close(self) -> None:
        if self._resident is not None:
            self._resident.close()
        if self._helper is not None:
            self._helper.close()
        self._sender.close()
        self._log_writer.close()
        self._state.close()
        self._ops.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RecallHelper:
    """recall's helper threads (``engine.Helper``): each reads the state db through its own
    read-only connection, to embed the query and run dense search beside the caller."""

    def __init__(self, state: Database, threads: int) -> None:
        self._state = state
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mnemo-recall")

    def submit(self, fn: Callable[[Any], T]) -> Future[T]:
        return self._pool.submit(lambda: fn(self._state.conn))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _with_log_id(result: RecallResult, log_id: int) -> RecallResult:
    from dataclasses import replace

    return replace(result, log_id=log_id)


def _explanation_text(explanation: Callable[[], str], tenant: str) -> str | None:
    """The recall-log row's JSON, built on the caller's thread (see ``log_writer``), or None
    with a warning when building it failed: a bug there must cost one log row, never the
    recall."""
    try:
        return explanation()
    except Exception as e:  # a bug in building: see the docstring
        log.warning("recall_log_failed", tenant=tenant, error=type(e).__name__)
        return None
