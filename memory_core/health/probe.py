"""Liveness of one process (``mnemo health --worker`` / ``--scheduler``), for Kubernetes,
compose and systemd: one indexed read of ``heartbeats``, no broker, no quick_check.

Alive: a heartbeat of that role, not stopped, renewed within ``MNEMO_HEALTH_STALE_S``, from
this host (any process of it) or from the process ``pid`` when one is given.
"""

from __future__ import annotations

import socket
from datetime import datetime

from memory_core import heartbeats
from memory_core.health.report import OK, UNHEALTHY, Check, HealthEnv


def probe(env: HealthEnv, role: str, *, pid: int | None = None,
          host: str | None = None) -> Check:
    """ok when a matching fresh heartbeat exists, else unhealthy with what was seen."""
    host = host or socket.gethostname()
    name = f"{role}_alive"
    mine = [b for b in heartbeats.read_all(env.ops, role)
            if b.host == host and (pid is None or b.pid == pid)]
    who = f"{role} pid {pid} on {host}" if pid is not None else f"a {role} on {host}"
    stale_s = env.settings.health_stale_s
    fresh = [b for b in mine if b.is_fresh(env.now, stale_s)]
    if fresh:
        beat = fresh[0]
        return Check(name, OK, f"{who}: heartbeat {beat.age_s(env.now):.1f} s old",
                     beat.as_json())
    if not mine:
        return Check(name, UNHEALTHY, f"no heartbeat from {who}")
    last = mine[0]
    if last.stopped_at is not None:
        return Check(name, UNHEALTHY, f"{who} stopped at {_iso(last.stopped_at)}",
                     last.as_json())
    return Check(name, UNHEALTHY, f"{who}: last heartbeat {last.age_s(env.now):.0f} s old "
                 f"(more than MNEMO_HEALTH_STALE_S={stale_s})", last.as_json())


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z")
