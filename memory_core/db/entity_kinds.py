"""What kind of entity a belief's subject or object is, as its predicate's role says.

The writer mints an entity from a name, so as a ``thing``. A belief whose predicate says
more gives it its kind ("Jonas lives in Seattle": Seattle is a place; "my sister Elin":
Elin is a person), once, while it is still a ``thing`` (``model.entities.classify``); a
kind set before (the hub's ``person``, an earlier role's) is kept. `mnemo entities list`
shows the kind, and the mirrors' entity rows and nodes carry it.

``backfill_sql``: the same for the entities of a store written before kinds were read
(state migration 5 in SQLite, 6 in the PostgreSQL primary), each entity it changes with an
``upsert`` in the outbox so the mirrors follow.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

THING = "thing"  # the kind of an entity minted from a name alone
PERSON, PLACE, ORGANIZATION, PET, EVENT = "person", "place", "organization", "pet", "event"
_RELATIONS = ("married_to", "has_partner", "has_sibling", "has_child", "has_parent",
              "has_relative", "friend_of", "colleague_of")
# predicate -> (the subject's kind, the object entity's kind); None: the role says nothing.
ROLE_KINDS: Mapping[str, tuple[str | None, str | None]] = MappingProxyType({
    **{p: (None, PLACE) for p in ("lives_in", "comes_from", "born_in", "moved_to", "visited")},
    **{p: (PERSON, ORGANIZATION) for p in ("works_at", "studies_at", "graduated_from")},
    "job_title_is": (PERSON, None),
    **{p: (PERSON, PERSON) for p in _RELATIONS},
    "has_pet": (PERSON, PET),
    "attended": (None, EVENT),
})
# The backfill's order when an entity has roles of two kinds (the writer keeps the first
# role it writes).
_ORDER = (PERSON, PLACE, ORGANIZATION, PET, EVENT)


def _in(predicates: list[str]) -> str:
    return "(" + ", ".join(f"'{p}'" for p in predicates) + ")"


def backfill_sql(now: str) -> list[str]:
    """Statements giving every ``thing`` with a telling role its kind (the same SQL in SQLite
    and PostgreSQL; ``now``: the storage encoding of the time, written as the change's
    time). Run in one transaction; a second run changes nothing."""
    out = []
    for kind in _ORDER:
        # One EXISTS per role, each a lookup of its own index (ix_beliefs_subject,
        # ix_beliefs_object): an OR inside one EXISTS made SQLite walk every belief of the
        # tenant for each entity.
        roles = []
        as_subject = [p for p, (s, _) in ROLE_KINDS.items() if s == kind]
        as_object = [p for p, (_, o) in ROLE_KINDS.items() if o == kind]
        if as_subject:
            roles.append("EXISTS (SELECT 1 FROM beliefs b WHERE b.tenant = entities.tenant AND "
                         f"b.subject_id = entities.entity_id AND b.predicate IN "
                         f"{_in(as_subject)})")
        if as_object:
            roles.append("EXISTS (SELECT 1 FROM beliefs b WHERE b.tenant = entities.tenant AND "
                         f"b.object_entity_id = entities.entity_id AND b.predicate IN "
                         f"{_in(as_object)})")
        where = f"entities.kind = '{THING}' AND ({' OR '.join(roles)})"
        out.append("INSERT INTO outbox (tenant, kind, object_id, op, created_at) SELECT "
                   f"tenant, 'entity', entity_id, 'upsert', '{now}' FROM entities WHERE {where}")
        out.append(f"UPDATE entities SET kind = '{kind}', updated_at = '{now}' WHERE {where}")
    return out
