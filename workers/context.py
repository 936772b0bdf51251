"""What the actors of one worker process share: settings, the two databases, the vector
index (with its embedder), the mirror sinks.

Built once per process, never at import: importing ``workers`` opens nothing. A worker
process builds it at start, before it takes a message (``workers.entry``); in-process callers
build it on first use (``LazyContext.get``). Building it migrates both databases forward,
loads the embedder, checks it against the one recorded for the data (``claim_embedder``:
a worker of another embedder would store rows without vectors, so it refuses) and makes sure
the default tenant (``MNEMO_TENANT``) exists. ``Database`` hands each worker thread its own
connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memory_core.db.checkpoint import WalCheckpointer
from memory_core.db.stores import Database, open_ops, open_state
from memory_core.embedders.base import Embedder
from memory_core.embedders.batching import batching_front, close_embedder
from memory_core.embedders.factory import make_embedder
from memory_core.extraction.api import candidates_for
from memory_core.mirrors.outbox import MirrorSink, configured_mirrors, make_sinks
from memory_core.model.tenants import create_tenant
from memory_core.model.turns import TurnInput, check_turn
from memory_core.settings import Settings
from memory_core.vectors import IndexState, VectorIndex
from memory_core.write.reextract import note_rules


def claim_embedder(settings: Settings, state: Database | None = None,
                   embedder: Embedder | None = None) -> IndexState:
    """Load the configured embedder and record it for a fresh data dir, or check that it is
    the one the data's vectors were made with.

    Raises:
        EmbedderMismatchError: the data records another embedder (the message names both
            and the fix).
        EmbedderError / StoreError: the model or the state db cannot be opened.
    """
    embedder = embedder or make_embedder(settings)
    embedder.load()
    db = state or open_state(settings)
    try:
        return VectorIndex(embedder).claim(db.conn, f"the data in {db.path}")
    finally:
        if state is None:
            db.close()


@dataclass
class WorkerContext:
    settings: Settings
    state: Database
    ops: Database
    index: VectorIndex
    _sinks: list[MirrorSink] | None = field(default=None, repr=False)
    _sinks_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    checkpointers: tuple[WalCheckpointer, ...] = ()

    @classmethod
    def open(cls, settings: Settings, *, threads: int | None = None) -> WorkerContext:
        """Open both databases (migrating them), load and claim the embedder, create the
        default tenant. Raises EmbedderMismatchError / StoreError / EmbedderError /
        ConfigurationError with the fix.

        The embedder is behind a batching front (``memory_core.embedders.batching``) that
        the process's ``threads`` worker threads share, unless MNEMO_EMBED_BATCH_WINDOW_MS
        is 0."""
        embedder = batching_front(make_embedder(settings), settings, callers=threads)
        # No checkpoint inside a commit (a thread checkpoints both files): the state db's
        # write lock bounds the whole pool.
        state = open_state(settings, autocheckpoint=False)
        try:
            claim_embedder(settings, state, embedder)
            ops = open_ops(settings, autocheckpoint=False)
        except BaseException:
            state.close()
            raise
        create_tenant(state.conn, settings.default_tenant)
        note_rules(state.conn)  # turns recorded before this were extracted by older rules
        checkpointers = tuple(WalCheckpointer(db, watch=True) for db in (state, ops)
                              if isinstance(db, Database))  # not the Postgres primary
        for checkpointer in checkpointers:
            checkpointer.start()
        return cls(settings, state, ops, VectorIndex(embedder), checkpointers=checkpointers)

    @property
    def mirrors(self) -> tuple[str, ...]:
        return configured_mirrors(self.settings)

    def sinks(self) -> list[MirrorSink]:
        """The configured sinks, built once per process (each keeps its connection pool);
        MirrorNotInstalled for a mirror this install has no sink for."""
        with self._sinks_lock:
            if self._sinks is None:
                self._sinks = make_sinks(self.settings)
            return self._sinks

    def close(self) -> None:
        with self._sinks_lock:
            for sink in self._sinks or ():
                sink.close()
            self._sinks = None
        for checkpointer in self.checkpointers:
            checkpointer.stop()
        close_embedder(self.index.embedder)
        self.state.close()
        self.ops.close()


_WARM_TEXT = ("Hi, I'm Sam. I live in Boston and work at Acme as an engineer; my sister "
              "Maya moved to Denver last May. I love hiking, I'm vegetarian, and I plan to "
              "visit Lisbon next Friday. We adopted a dog named Rex.")


def warm_extractor() -> None:
    """Run the default extractor once on a sample text: its gate scan and rules compile on
    first use (about a CPU-second in all), which would otherwise land on the first
    messages a worker process handles."""
    candidates_for(None, check_turn(TurnInput(
        tenant="warm", session_id="warm", turn_uid="warm", speaker="user", text=_WARM_TEXT,
        occurred_at=datetime(2024, 1, 1, tzinfo=UTC))))


class LazyContext:
    """A ``WorkerContext`` built on first use (thread-safe) and closed with the worker."""

    def __init__(self, settings: Settings | None = None, *,
                 opener: Callable[[Settings], WorkerContext] = WorkerContext.open) -> None:
        self._settings = settings
        self._opener = opener
        self._context: WorkerContext | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, context: WorkerContext) -> LazyContext:
        """An already built context (tests, and callers that run actors in-process)."""
        lazy = cls(context.settings)
        lazy._context = context
        return lazy

    def get(self) -> WorkerContext:
        context = self._context
        if context is None:
            with self._lock:
                if self._context is None:
                    # No settings given: this process's entry point is the first message.
                    settings = self._settings or Settings.from_env()
                    self._context = self._opener(settings)
                context = self._context
        return context

    def close(self) -> None:
        with self._lock:
            context, self._context = self._context, None
        if context is not None:
            context.close()
