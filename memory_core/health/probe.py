"""Probes for one process, for a Kubernetes ``livenessProbe`` / ``readinessProbe`` or a
compose ``healthcheck``.

Liveness (``probe``): the process is running, i.e. a heartbeat of ``role`` renewed within
``MNEMO_HEALTH_STALE_S``, from this host (any process of it) or from the process ``pid``.
Readiness (``ready=True``, workers): alive *and* taking messages; a worker its StorageGuard
paused (a database read-only, full or damaged) is alive but not ready. Restarting a paused
worker would not help (it pauses again on the same file), so a paused worker passes the
liveness probe and fails the readiness one.
"""

from __future__ import annotations

import socket

from memory_core import heartbeats
from memory_core.clock import to_display
from memory_core.health.report import OK, UNHEALTHY, Check, HealthEnv


def probe(env: HealthEnv, role: str, *, pid: int | None = None,
          host: str | None = None, ready: bool = False) -> Check:
    """ok when a matching fresh heartbeat exists (and, with ``ready``, one not paused),
    else unhealthy with what was seen."""
    host = host or socket.gethostname()
    name = f"{role}_ready" if ready else f"{role}_alive"
    mine = [b for b in heartbeats.read_all(env.ops, role)
            if b.host == host and (pid is None or b.pid == pid)]
    who = f"{role} pid {pid} on {host}" if pid is not None else f"a {role} on {host}"
    stale_s = env.settings.health_stale_s
    fresh = [b for b in mine if b.is_fresh(env.now, stale_s)]
    if fresh:
        taking = [b for b in fresh if b.paused_reason() is None]
        beat = (taking or fresh)[0]
        seen = f"{who}: heartbeat {beat.age_s(env.now):.1f} s old"
        why = beat.paused_reason()
        if why is None:
            return Check(name, OK, seen, beat.as_json())
        paused = (f"{seen}, paused: {why} (alive, not ready; it resumes by itself once the "
                  "database is fixed: see `mnemo health`)")
        return Check(name, UNHEALTHY if ready else OK, paused, beat.as_json())
    if not mine:
        return Check(name, UNHEALTHY, f"no heartbeat from {who}")
    last = mine[0]
    if last.stopped_at is not None:
        return Check(name, UNHEALTHY, f"{who} stopped at {to_display(last.stopped_at)}",
                     last.as_json())
    return Check(name, UNHEALTHY, f"{who}: last heartbeat {last.age_s(env.now):.0f} s old "
                 f"(more than MNEMO_HEALTH_STALE_S={stale_s})", last.as_json())
