"""What memory knows, listed for people (``mnemo beliefs``, ``mnemo entities``).

Read-only and scoped by tenant. ``list_beliefs`` shows what recall would treat as true: by
default the currently valid beliefs (``candidates.belief_filter``: active or in conflict,
``valid_from <= now < valid_to``, not past ``expires_at``); with ``as_of`` the ones valid
at that world time (superseded and expired ones included, as recall's ``as_of`` does); with
``include_history`` every status (invalidated and pending review too), at ``as_of`` when
given, else over all time. ``belief_history`` is one subject's chain of values for one
predicate, oldest first, every status. A subject is found by its name or any alias,
case-insensitively ("I", "me" and "user" name the tenant's hub).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from memory_core.db.sqlite import Connection
from memory_core.errors import NotFoundError
from memory_core.model.entities import lookup
from memory_core.model.hygiene import normalize_label
from memory_core.model.predicates import get_predicate
from memory_core.model.tenants import require_tenant
from memory_core.recall.candidates import Scope, belief_filter

MAX_ROWS = 100_000  # a bound on one listing; a tenant with more is listed by subject

_BELIEF_COLUMNS = ("b.belief_uid, b.subject_id, e.name, b.predicate, b.object_text, "
                   "b.negated, b.valid_from, b.valid_to, b.status, b.confidence, b.source, "
                   "b.turn_uid, b.recorded_at, b.retired_at, b.expires_at")


@dataclass(frozen=True)
class BeliefView:
    """One belief as a person reads it: the subject by name, the times as stored (UTC)."""

    belief_uid: str
    subject_id: str
    subject: str
    predicate: str
    object: str
    negated: bool
    valid_from: str
    valid_to: str | None
    status: str
    confidence: float
    source: str
    turn_uid: str | None
    recorded_at: str
    retired_at: str | None
    expires_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EntityView:
    entity_id: str
    name: str
    kind: str
    aliases: list[str]  # the labels that resolve to it, its name aside
    beliefs: int  # beliefs recall can show that touch it (its belief_count)
    beliefs_as_subject: int  # beliefs about it, every status (history included)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_subject(conn: Connection, tenant: str, label: str) -> str:
    """The entity id ``label`` names (its name or an alias, any case); NotFoundError with
    the fix when none does."""
    entity_id = lookup(conn, tenant, label)
    if entity_id is None:
        row = conn.execute(
            "SELECT entity_id FROM entities WHERE tenant = ? AND lower(name) = ? LIMIT 1",
            (tenant, normalize_label(label))).fetchone()
        entity_id = row[0] if row else None
    if entity_id is None:
        raise NotFoundError(f"no entity named {label!r} in tenant {tenant!r}: see its entities "
                            f"with `mnemo entities list --tenant {tenant}`")
    return entity_id


def _visible(tenant: str, now: str, as_of: str | None,
             include_history: bool) -> tuple[str, list[Any]]:
    if not include_history:
        return belief_filter(Scope(tenant, now, as_of))
    if as_of is None:
        return "b.tenant = ?", [tenant]
    return ("b.tenant = ? AND b.valid_from <= ? AND (b.valid_to IS NULL OR b.valid_to > ?)",
            [tenant, as_of, as_of])


def list_beliefs(conn: Connection, tenant: str, *, now: str, subject: str | None = None,
                 predicate: str | None = None, as_of: str | None = None,
                 include_history: bool = False) -> list[BeliefView]:
    """The beliefs of ``tenant`` (see the module docstring), by subject name, predicate and
    world time. ``now`` and ``as_of``: stored-time text (``clock.to_db``). Raises
    UnknownTenantError, UnknownPredicateError, or NotFoundError for an unknown subject."""
    require_tenant(conn, tenant)
    where, params = _visible(tenant, now, as_of, include_history)
    if subject is not None:
        where += " AND b.subject_id = ?"
        params.append(find_subject(conn, tenant, subject))
    if predicate is not None:
        get_predicate(predicate)
        where += " AND b.predicate = ?"
        params.append(predicate)
    rows = conn.execute(
        f"SELECT {_BELIEF_COLUMNS} FROM beliefs b JOIN entities e ON e.tenant = b.tenant AND "
        f"e.entity_id = b.subject_id WHERE {where} "
        "ORDER BY e.name, b.predicate, b.valid_from, b.id LIMIT ?", [*params, MAX_ROWS])
    return [_view(r) for r in rows]


def belief_history(conn: Connection, tenant: str, subject: str,
                   predicate: str) -> list[BeliefView]:
    """Every value ``subject`` has had for ``predicate``, oldest first (world time, then
    system time), whatever its status now."""
    require_tenant(conn, tenant)
    get_predicate(predicate)
    entity_id = find_subject(conn, tenant, subject)
    rows = conn.execute(
        f"SELECT {_BELIEF_COLUMNS} FROM beliefs b JOIN entities e ON e.tenant = b.tenant AND "
        "e.entity_id = b.subject_id WHERE b.tenant = ? AND b.subject_id = ? AND "
        "b.predicate = ? ORDER BY b.valid_from, b.recorded_at, b.id",
        (tenant, entity_id, predicate))
    return [_view(r) for r in rows]


def _view(row: tuple[Any, ...]) -> BeliefView:
    (uid, subject_id, name, predicate, obj, negated, valid_from, valid_to, status, confidence,
     source, turn_uid, recorded_at, retired_at, expires_at) = row
    return BeliefView(uid, subject_id, name, predicate, obj, bool(negated), valid_from,
                      valid_to, status, confidence, source, turn_uid, recorded_at, retired_at,
                      expires_at)


def list_entities(conn: Connection, tenant: str) -> list[EntityView]:
    """The entities of ``tenant`` by name, with their aliases and belief counts."""
    require_tenant(conn, tenant)
    aliases: dict[str, list[str]] = {}
    for entity_id, label in conn.execute(
            "SELECT entity_id, label FROM entity_aliases WHERE tenant = ? ORDER BY label",
            (tenant,)):
        aliases.setdefault(entity_id, []).append(label)
    subjects = dict(conn.execute(
        "SELECT subject_id, count(*) FROM beliefs WHERE tenant = ? GROUP BY subject_id",
        (tenant,)).fetchall())
    out = []
    for entity_id, name, kind, count in conn.execute(
            "SELECT entity_id, name, kind, belief_count FROM entities WHERE tenant = ? "
            "ORDER BY name, entity_id", (tenant,)):
        own = normalize_label(name)
        others = [a for a in aliases.get(entity_id, []) if normalize_label(a) != own]
        out.append(EntityView(entity_id, name, kind, others, count, subjects.get(entity_id, 0)))
    return out
