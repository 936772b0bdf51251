"""A real worker process for the queue tests, built by ``workers.entry`` with a test actor.

Usage: python -m tests.helpers.queue_worker --marker FILE [--hang] [--fail] [--sleep S]
       [--namespace NS] [--threads N] [--heartbeat-ms MS] [--maintenance-s S] [--ready]

Settings come from MNEMO_* in the environment (data dir, broker URL, lease). The actor
``mark(key)`` on queue ``contract`` appends "KEY PID start" to FILE, sleeps S seconds (with
--hang: until killed), then appends "KEY PID done"; with --fail it raises instead (three
retries 100 ms to 1 s apart, then a dead letter). With --ready it first appends "- PID
ready" once its broker is built, just before it serves (a test can then time what follows
without the interpreter's start, seconds on a loaded machine). Appends of one short line
are atomic, so several processes can share FILE.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import dramatiq

from memory_core.log import configure_logging
from memory_core.settings import Settings
from workers.entry import build_worker_broker, serve, stop_on_signals
from workers.middleware import install_log_redaction


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--marker", required=True)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--namespace", default="mnemo")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--heartbeat-ms", type=int, default=5000)
    parser.add_argument("--maintenance-s", type=float, default=1.0)
    parser.add_argument("--ready", action="store_true")
    args = parser.parse_args()

    def mark(key: str) -> None:
        _append(args.marker, f"{key} {os.getpid()} start")
        if args.hang:
            time.sleep(3600)
        if args.fail:
            raise RuntimeError("mark failed on purpose")
        time.sleep(args.sleep)
        _append(args.marker, f"{key} {os.getpid()} done")

    def declare(broker: Any) -> None:
        dramatiq.actor(mark, broker=broker, actor_name="mark", queue_name="contract",
                       max_retries=3, min_backoff=100, max_backoff=1000)

    settings = Settings.from_env()
    configure_logging(settings)
    install_log_redaction()
    stop = stop_on_signals()
    options: dict[str, Any] = {"namespace": args.namespace}
    if settings.broker_kind == "redis":
        options.update(heartbeat_timeout_ms=args.heartbeat_ms,
                       maintenance_interval_s=args.maintenance_s)
    broker = build_worker_broker(settings, declare=declare, **options)
    if args.ready:
        _append(args.marker, f"- {os.getpid()} ready")
    serve(settings, broker, stop, threads=args.threads, grace_s=5)


if __name__ == "__main__":
    main()
