"""Health of the mirrors' content: the drift the last reconcile or backup check found."""

from __future__ import annotations

from memory_core.health.report import DEGRADED, OK, Check, HealthEnv
from memory_core.mirrors.outbox import configured_mirrors
from memory_core.mirrors.reconcile import last_drift


def check_mirror_drift(env: HealthEnv) -> Check:
    """Degraded when the last check of a configured mirror (the ``backup`` schedule's, every
    6 h, or `mnemo mirror reconcile`) found facts it holds wrongly and nothing repaired them
    since. Reads memory_ops.db only: it answers while a mirror is down."""
    sinks = configured_mirrors(env.settings)
    if not sinks:
        return Check("mirror_drift", OK, "not configured")
    found = {sink: last_drift(env.ops, sink) for sink in sinks}
    detail = {s: ({"checked_at": f[0], "tenants": f[1]} if f else None) for s, f in found.items()}
    drifted = {s: f for s, f in found.items() if f is not None and f[1]}
    if drifted:
        parts = []
        for sink, (at, tenants) in drifted.items():
            n = {k: sum(t[k] for t in tenants.values()) for k in ("dead", "missing", "stale")}
            parts.append(f"{sink} ({at}: {n['dead']} dead, {n['missing']} missing, "
                         f"{n['stale']} stale fact(s) in {len(tenants)} tenant(s))")
        return Check("mirror_drift", DEGRADED,
                     f"mirror(s) drifted from the memory: {', '.join(parts)}: repair with "
                     "`mnemo mirror reconcile` (see --dry-run first)", detail)
    unchecked = [s for s, f in found.items() if f is None]
    clean = [f"{s} clean at {f[0]}" for s, f in found.items() if f is not None]
    text = ", ".join(clean + [f"{s} not checked yet (the backup schedule checks it)"
                              for s in unchecked])
    return Check("mirror_drift", OK, text, detail)
