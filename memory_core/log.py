"""Logging, configured once per process: structlog's events and stdlib records in one format.

One handler on the root logger writes to stderr through one structlog ``ProcessorFormatter``:
JSON lines when ``MNEMO_LOG_FORMAT`` is ``json`` (or ``auto`` off a terminal), a console
renderer otherwise. structlog's own events reach it through stdlib logging
(``ProcessorFormatter.wrap_for_formatter``); records of the standard library and of
third-party code (Dramatiq, redis-py, the neo4j driver, ``warnings``) get the same context,
level, logger name and timestamp (``foreign_pre_chain``), so a worker writes one format, not
JSON mixed with plain text.

Levels: structlog events from ``MNEMO_LOG_LEVEL`` up; third-party records from
``max(MNEMO_LOG_LEVEL, WARNING)`` up, so Dramatiq's per-message info lines stay out.

Context (message id, actor, tenant) is bound per unit of work with contextvars by the worker
middleware and appears on Dramatiq's lines too. Memory text, query text and secrets are never
passed to a logger: log ids, counts and digests. Dramatiq's lines print a message as
``actor[message_id]``: ``workers.middleware.install_log_redaction`` puts its filter on the
handler made here, which serves both paths and survives ``force=True``.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import structlog
from structlog.stdlib import ProcessorFormatter

from memory_core.settings import Settings

_lock = threading.Lock()
_configured = False
_handler: _StderrHandler | None = None


class _StderrHandler(logging.StreamHandler[Any]):
    """A stream handler writing to ``sys.stderr`` as it is when each record is written.

    A test runner that swaps stderr around a call (click's CliRunner) must not leave the
    process's one handler holding a stream closed after that call.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr


class _ForeignLevel(logging.Filter):
    """Passes structlog's events (already filtered by level) and other records from
    ``level`` up."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        # ``wrap_for_formatter`` marks structlog's records with ``_logger`` (as
        # ProcessorFormatter itself tells them apart).
        return hasattr(record, "_logger") or record.levelno >= self.level


def renders_json(settings: Settings) -> bool:
    """Whether this process's log lines are JSON (``MNEMO_LOG_FORMAT``, ``auto`` resolved):
    a command that writes a line of its own to stderr beside them writes it as a log event
    then, so the stream stays one JSON object per line."""
    return settings.log_format == "json" or (settings.log_format == "auto"
                                             and not sys.stderr.isatty())


def _renderer(settings: Settings) -> structlog.typing.Processor:
    if renders_json(settings):
        return structlog.processors.JSONRenderer()
    return structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())


def _level(settings: Settings) -> int:
    return int(getattr(logging, settings.log_level.upper()))


def _stamping(*, logger_name: bool) -> list[structlog.typing.Processor]:
    """What every line carries: the unit of work's context, the level, (through stdlib
    logging) the logger's name, and the time."""
    return [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
            *([structlog.stdlib.add_logger_name] if logger_name else []),
            structlog.processors.TimeStamper(fmt="iso", utc=True)]


def _stderr_handler(level: int) -> _StderrHandler:
    """The process's one handler, made on first use and reused (its filters stay)."""
    global _handler
    if _handler is None:
        _handler = _StderrHandler()
        _handler.addFilter(_ForeignLevel(level))
    for f in _handler.filters:
        if isinstance(f, _ForeignLevel):
            f.level = level
    return _handler


class _CurrentStderr:
    """``sys.stderr`` as it is at each write (a test runner may swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_library_logging(settings: Settings) -> None:
    """mnemo's own events in an application's process (``Memory.open``): when nothing has
    configured structlog (neither the application nor mnemo's CLI or workers), they go to
    stderr in ``MNEMO_LOG_FORMAT`` from ``MNEMO_LOG_LEVEL`` up, instead of structlog's
    default (stdout, console format, every level), where they would mix with the
    application's own output. Nothing else of the process's logging is touched (no root
    handler, no level), and an application that configured structlog keeps its
    configuration."""
    with _lock:
        if _configured or structlog.is_configured():
            return
        structlog.configure(
            processors=[*_stamping(logger_name=False), structlog.processors.StackInfoRenderer(),
                        structlog.processors.format_exc_info, _renderer(settings)],
            wrapper_class=structlog.make_filtering_bound_logger(_level(settings)),
            # The stream is looked up at each write: a TextIO in all but name.
            logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
            cache_logger_on_first_use=False)


def configure_logging(settings: Settings, *, force: bool = False) -> None:
    """Configure structlog and stdlib logging for this process (idempotent).

    ``force`` applies ``settings`` again (format, level) to the same single handler.
    """
    global _configured
    with _lock:
        if _configured and not force:
            return
        level = _level(settings)
        shared = _stamping(logger_name=True)
        structlog.configure(
            processors=[*shared, structlog.processors.StackInfoRenderer(),
                        structlog.processors.format_exc_info,
                        ProcessorFormatter.wrap_for_formatter],
            wrapper_class=structlog.make_filtering_bound_logger(level),
            logger_factory=structlog.stdlib.LoggerFactory(),
            # Not cached: a cached module logger keeps the processors of its first use, so a
            # later reconfiguration (``force``, a test's ``capture_logs``) would not reach
            # it. A bind per log call costs microseconds; no hot path logs per call.
            cache_logger_on_first_use=False,
        )
        handler = _stderr_handler(max(level, logging.WARNING))
        handler.setFormatter(ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[ProcessorFormatter.remove_processors_meta,
                        structlog.processors.format_exc_info, _renderer(settings)]))
        root = logging.getLogger()
        if handler not in root.handlers:
            root.addHandler(handler)
        # The root passes everything structlog may emit; the handler's filter holds
        # third-party records to WARNING and up.
        root.setLevel(level)
        logging.captureWarnings(True)  # warnings.warn() as a log line, not plain text
        _configured = True
