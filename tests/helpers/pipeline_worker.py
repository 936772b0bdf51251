"""A real worker process with the real post-turn actors, for the completeness tests.

Usage: python -m tests.helpers.pipeline_worker [--queues turns,consolidate] [--threads N]
       [--heartbeat-ms MS] [--maintenance-s S]

Settings come from MNEMO_* in the environment. As ``mnemo worker`` (one process): migrates
both databases, builds the context, serves (with the spool and journal relay on Redis);
``--queues`` limits what it consumes, so a test can leave one queue's messages waiting.
"""

from __future__ import annotations

import argparse

from memory_core.db import migrate_stores
from memory_core.log import configure_logging
from memory_core.settings import Settings
from workers.context import LazyContext
from workers.entry import build_worker_broker, serve, stop_on_signals
from workers.middleware import install_log_redaction


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", default="")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--heartbeat-ms", type=int, default=2000)
    parser.add_argument("--maintenance-s", type=float, default=0.5)
    args = parser.parse_args()
    settings = Settings.from_env()
    configure_logging(settings)
    install_log_redaction()
    stop = stop_on_signals()
    migrate_stores(settings)
    context = LazyContext(settings)
    context.get()
    options = ({"heartbeat_timeout_ms": args.heartbeat_ms,
                "maintenance_interval_s": args.maintenance_s}
               if settings.broker_kind == "redis" else {})
    queues = set(args.queues.split(",")) if args.queues else None
    broker = build_worker_broker(settings, context=context, queues=queues, **options)
    try:
        serve(settings, broker, stop, threads=args.threads, grace_s=5, queues=queues)
    finally:
        context.close()


if __name__ == "__main__":
    main()
