"""A batching front for the embedder a worker process's threads share.

A worker thread embeds a handful of texts per message (a turn's episode, its beliefs, an
anchor). One call per message runs a model of fastembed's kind at batch size 1, which costs
a third more CPU per text than batches of 32 (``bench/pipeline.py`` measures it), so the
threads of one process submit to one ``BatchingEmbedder`` instead: the first request opens a
short collection window (``window_ms``), and the batch runs when the window closes, when
``max_texts`` texts are waiting, or when every thread that can submit (``callers``) is
waiting — whichever comes first. Identical texts in a batch are embedded once, and the batch
goes to the model in runs of similar length: a transformer pads every text of a call to the
longest, so one 100-word turn in a call of 10-word ones multiplies its cost (on LoCoMo turns
a batch of 16 in arrival order cost 1.7x as much CPU per text as one text per call; sorted
into runs of similar length, 0.8x).

Each caller blocks until its own rows are ready and gets exactly them. Errors go to the
caller whose texts caused them: when a batch fails, each request of it is run again on its
own, so one bad request fails alone. ``TypeError`` for bad arguments is raised in the
caller's thread before anything is queued. The dispatcher is a daemon thread started on the
first request; it survives any exception of the model (a ``SystemExit`` reaches its callers
as an ``EmbedderError``), a waiting caller restarts it should it ever be gone, and a call
from the dispatcher itself, or after ``close()``, embeds directly: nothing can wait on a
dispatcher that is not there.

The front changes nothing about durability: the write path embeds before it opens its write
transaction (``memory_core.model.write_tx.Embeds``), so a batch that fails or a process that
dies while waiting leaves nothing half-written; the message is retried or redelivered.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from memory_core.embedders.base import Embedder, WrappingEmbedder, check_texts
from memory_core.errors import ConfigurationError, EmbedderError
from memory_core.settings import Settings

log = structlog.get_logger(__name__)

DEFAULT_WINDOW_MS = 5
DEFAULT_MAX_TEXTS = 32
# A run of similar length: its longest text at most this many times its shortest, plus slack.
_RUN_RATIO = 1.3
_RUN_SLACK_CHARS = 20
_WATCH_S = 1.0  # how often a waiting caller checks that the dispatcher is alive


@dataclass(eq=False)
class _Request:
    texts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    rows: np.ndarray | None = None
    error: BaseException | None = None
    ahead: bool = False  # a ``prefetch``: no caller waits; its rows are kept for one


class BatchingEmbedder(WrappingEmbedder):
    """Runs the ``embed`` calls of many threads on ``inner`` as batches (see the module).

    ``identity``, ``dim``, ``kind`` and ``semantic`` are the inner embedder's, so the vectors
    and the recorded identity are exactly those of ``inner`` called directly.

    Raises:
        ConfigurationError: ``window_ms`` is negative, ``max_texts`` or ``callers`` is not a
            positive integer.
    """

    def __init__(self, inner: Embedder, *, window_ms: float = DEFAULT_WINDOW_MS,
                 max_texts: int = DEFAULT_MAX_TEXTS, callers: int | None = None) -> None:
        if isinstance(window_ms, bool) or not isinstance(window_ms, int | float) \
                or not 0 <= window_ms <= 1000:
            raise ConfigurationError(f"embedding batch window {window_ms!r} ms is invalid: use "
                                     "0 to 1000 ms (MNEMO_EMBED_BATCH_WINDOW_MS)")
        for name, value, where in (("max_texts", max_texts, "MNEMO_EMBED_BATCH_MAX_TEXTS"),
                                   ("callers", callers, "the worker's thread count")):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ConfigurationError(f"embedding batch {name} {value!r} is invalid: use a "
                                         f"positive integer ({where})")
        super().__init__(inner)
        self.window_s = window_ms / 1000
        self.max_texts = max_texts
        self.callers = callers
        self._cond = threading.Condition()
        self._pending: deque[_Request] = deque()
        self._ahead: dict[str, _Request] = {}  # texts of prefetches not yet run
        self._ready: OrderedDict[str, np.ndarray] = OrderedDict()  # prefetched rows, oldest first
        self._dispatcher: threading.Thread | None = None
        self._closed = False
        self.batches = 0  # batches run, texts embedded, model calls: logged at close
        self.texts = 0
        self.calls = 0
        self.sizes: Counter[int] = Counter()  # batches by their number of texts

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in the next batch; see :meth:`Embedder.embed`. Blocks until done.
        Texts prefetched (``prefetch``) are taken from there, waiting for their batch if it
        has not run yet."""
        items = check_texts(texts)
        if not items or self.window_s == 0 \
                or threading.current_thread() is self._dispatcher:
            return self.inner.embed(items)
        found = self._take_prefetched(items)
        missing = [t for t in dict.fromkeys(items) if t not in found]
        if missing:
            rows = self._submit(missing)
            found.update(zip(missing, rows, strict=True))
        return np.stack([found[t] for t in items])

    def prefetch(self, texts: Sequence[str]) -> None:
        """Start embedding ``texts`` that an ``embed`` call will ask for soon (a worker's
        consumer thread calls it for the messages it has leased, so the model gets batches
        as large as the messages waiting, not as the threads running). Returns at once; the
        rows are kept for the next ``embed`` of the same text (at most ``4 * max_texts``
        texts, oldest dropped first). Nothing to do with batching off or after ``close``."""
        items = check_texts(texts)
        if not items or self.window_s == 0:
            return
        with self._cond:
            if self._closed:
                return
            new = [t for t in dict.fromkeys(items) if t not in self._ahead and t not in self._ready]
            if not new:
                return
            request = _Request(new, ahead=True)
            for text in new:
                self._ahead[text] = request
            self._start_dispatcher()
            self._pending.append(request)
            self._cond.notify_all()

    def _take_prefetched(self, items: list[str]) -> dict[str, np.ndarray]:
        """The rows of ``items`` that were prefetched (waiting for a batch still to run)."""
        with self._cond:
            if not self._ahead and not self._ready:
                return {}
            waits = {self._ahead[t] for t in items if t in self._ahead}
        for request in waits:
            self._wait(request)
        found: dict[str, np.ndarray] = {}
        with self._cond:
            for text in items:
                row = self._ready.pop(text, None)
                if row is not None:
                    found[text] = row
        return found

    def _submit(self, items: list[str]) -> np.ndarray:
        request = _Request(items)
        with self._cond:
            closed = self._closed
            if not closed:
                self._start_dispatcher()
                self._pending.append(request)
                self._cond.notify_all()
        if closed:
            return self.inner.embed(items)
        self._wait(request)
        if request.error is not None:
            raise request.error
        assert request.rows is not None
        return request.rows

    def _wait(self, request: _Request) -> None:
        while not request.done.wait(_WATCH_S):
            with self._cond:  # a dispatcher that died (SystemExit, ...) is replaced
                if request in self._pending:
                    self._start_dispatcher()

    def close(self) -> None:
        """Run what is queued, stop the dispatcher; later calls embed directly."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None and dispatcher is not threading.current_thread():
            dispatcher.join(timeout=30)
        if dispatcher is not None and self.batches:  # once, by the close that stopped it
            log.info("embedding_batches", batches=self.batches, texts=self.texts,
                     model_calls=self.calls,
                     texts_per_batch=round(self.texts / self.batches, 2),
                     batch_sizes={str(k): v for k, v in sorted(self.sizes.items())})

    def _start_dispatcher(self) -> None:
        if self._dispatcher is None or not self._dispatcher.is_alive():
            self._dispatcher = threading.Thread(target=self._dispatch, daemon=True,
                                                name="mnemo-embed-batcher")
            self._dispatcher.start()

    def _dispatch(self) -> None:
        while True:
            batch = self._collect()
            if batch is None:
                return
            self._run(batch)

    def _collect(self) -> list[_Request] | None:
        """Wait for a request, then for the window to close (or the batch to fill)."""
        with self._cond:
            while not self._pending:
                if self._closed:
                    return None
                self._cond.wait()
            deadline = time.monotonic() + self.window_s
            while not self._closed and not self._full():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch = [self._pending.popleft()]
            size = len(batch[0].texts)
            while self._pending and size + len(self._pending[0].texts) <= self.max_texts:
                size += len(self._pending[0].texts)
                batch.append(self._pending.popleft())
            return batch

    def _full(self) -> bool:
        # Every thread that can call is waiting (a prefetch is nobody waiting).
        if self.callers is not None \
                and sum(not r.ahead for r in self._pending) >= self.callers:
            return True
        return sum(len(r.texts) for r in self._pending) >= self.max_texts

    def _run(self, batch: list[_Request]) -> None:
        try:
            unique = list(dict.fromkeys(t for r in batch for t in r.texts))
            try:
                rows = self._embed_runs(unique)
            except Exception:
                if len(batch) == 1:
                    raise
                for request in batch:  # one bad request must not fail the others
                    self._run([request])
                return
            self.batches += 1
            self.texts += len(unique)
            self.sizes[len(unique)] += 1
            where = {text: i for i, text in enumerate(unique)}
            for request in batch:
                request.rows = rows[[where[t] for t in request.texts]]
        except BaseException as e:
            for request in batch:
                if request.rows is None and request.error is None:
                    request.error = e
            if not isinstance(e, Exception):
                # SystemExit and the like from the model: the callers get an EmbedderError
                # (their message is retried), not a process-level exception, and the
                # dispatcher keeps serving.
                for request in batch:
                    if request.error is e:
                        request.error = _stopped(e)
        finally:
            self._keep_prefetched([r for r in batch if r.ahead])
            for request in batch:
                if request.rows is not None or request.error is not None:
                    request.done.set()

    def _keep_prefetched(self, done: list[_Request]) -> None:
        """Rows of prefetches that ran, kept for the ``embed`` that asks for them (a failed
        prefetch keeps nothing: that ``embed`` runs the texts again, and gets the error)."""
        if not done:
            return
        with self._cond:
            for request in done:
                for i, text in enumerate(request.texts):
                    if self._ahead.get(text) is request:
                        del self._ahead[text]
                    if request.rows is not None:
                        self._ready[text] = request.rows[i]
                        self._ready.move_to_end(text)
            while len(self._ready) > 4 * self.max_texts:
                self._ready.popitem(last=False)

    def _embed_runs(self, texts: list[str]) -> np.ndarray:
        """``inner.embed(texts)``, called once per run of texts of similar length."""
        rows: np.ndarray | None = None
        for run in similar_length_runs(texts):
            vectors = self.inner.embed([texts[i] for i in run])
            self.calls += 1
            if rows is None:
                rows = np.empty((len(texts), vectors.shape[1]), dtype=vectors.dtype)
            rows[run] = vectors
        assert rows is not None
        return rows

    def __repr__(self) -> str:
        return (f"<BatchingEmbedder of {self.inner!r} window_ms={self.window_s * 1000:g} "
                f"max_texts={self.max_texts} callers={self.callers}>")


def similar_length_runs(texts: Sequence[str]) -> list[list[int]]:
    """The positions of ``texts`` sorted by length and cut into runs whose longest text is at
    most ``_RUN_RATIO`` times (plus ``_RUN_SLACK_CHARS``) the shortest."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    runs: list[list[int]] = []
    for i in order:
        if not runs or len(texts[i]) > _RUN_RATIO * len(texts[runs[-1][0]]) + _RUN_SLACK_CHARS:
            runs.append([])
        runs[-1].append(i)
    return runs


def _stopped(cause: BaseException) -> EmbedderError:
    error = EmbedderError(f"the embedding model raised {type(cause).__name__} in the batch "
                          "thread: the message is retried; if it repeats, set "
                          "MNEMO_EMBED_BATCH_WINDOW_MS=0 to embed without batching")
    error.__cause__ = cause
    return error


def batching_front(embedder: Embedder, settings: Settings, *,
                   callers: int | None = None) -> Embedder:
    """``embedder`` behind a ``BatchingEmbedder`` configured by ``settings``
    (``MNEMO_EMBED_BATCH_WINDOW_MS``, ``MNEMO_EMBED_BATCH_MAX_TEXTS``); ``embedder`` itself
    when the window is 0 (batching off). ``callers``: the threads that share it."""
    if settings.embed_batch_window_ms == 0:
        return embedder
    return BatchingEmbedder(embedder, window_ms=settings.embed_batch_window_ms,
                            max_texts=settings.embed_batch_max_texts, callers=callers)


def close_embedder(embedder: Any) -> None:
    """Stop a batching front's dispatcher (other embedders have nothing to close)."""
    if isinstance(embedder, BatchingEmbedder):
        embedder.close()
