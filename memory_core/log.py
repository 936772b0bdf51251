"""structlog, configured once per process.

JSON lines when stderr is not a terminal, a console renderer otherwise. Context (message id,
actor, tenant) is bound per unit of work with contextvars by the worker middleware. Memory
text, query text and secrets are never passed to a logger: log ids, counts and digests.
"""

from __future__ import annotations

import logging
import sys
import threading

import structlog

from memory_core.settings import Settings

_lock = threading.Lock()
_configured = False


def configure_logging(settings: Settings, *, force: bool = False) -> None:
    """Configure structlog and stdlib logging for this process (idempotent)."""
    global _configured
    with _lock:
        if _configured and not force:
            return
        fmt = settings.log_format
        if fmt == "auto":
            fmt = "console" if sys.stderr.isatty() else "json"
        renderer: structlog.typing.Processor
        if fmt == "json":
            renderer = structlog.processors.JSONRenderer()
        else:
            renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        level = getattr(logging, settings.log_level.upper())
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.StackInfoRenderer(),
                structlog.processors.format_exc_info,
                renderer,
            ],
            wrapper_class=structlog.make_filtering_bound_logger(level),
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            cache_logger_on_first_use=True,
        )
        # Third-party libraries log through stdlib logging; keep them quiet and on stderr.
        logging.basicConfig(level=max(level, logging.WARNING), stream=sys.stderr)
        _configured = True
