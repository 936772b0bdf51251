"""``belief_count`` and ``graph_degree`` of entities: the one definition, and the recount.

- ``belief_count``: beliefs recall can show (status active or conflict) whose subject or
  object entity is this entity, each belief counted once.
- ``graph_degree``: those of them that are edges between two different entities.

Writes keep both right incrementally (``belief_rules.count_contribution`` before and after
each change, applied by ``WriteTx.flush``); rare whole-entity operations (merge, delete) and
the sleep loop use ``recount``. ``count_drift`` is what tests and the sweep check: it must
always be empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_core.db.sqlite import Connection
from memory_core.model.belief_rules import COUNTED
from memory_core.vocabulary import sql_list

_COUNTED_SQL = sql_list(COUNTED)

# The single source of truth. Parameters: tenant, then an optional entity filter. Each
# count is split into "as subject" + "as object of another subject" (a belief is counted
# once) so both halves are index searches (ix_beliefs_subject, ix_beliefs_object): an OR of
# the two columns makes SQLite walk every belief of the tenant for each entity. (The unary
# "+" keeps SQLite from using the object index for "IS NOT NULL": a scan of the tenant.)
RECOUNT_SQL = f"""
SELECT e.entity_id,
  (SELECT count(*) FROM beliefs b WHERE b.tenant = e.tenant AND b.subject_id = e.entity_id
     AND b.status IN ({_COUNTED_SQL}))
  + (SELECT count(*) FROM beliefs b WHERE b.tenant = e.tenant
     AND b.object_entity_id = e.entity_id AND b.subject_id != e.entity_id
     AND b.status IN ({_COUNTED_SQL})),
  (SELECT count(*) FROM beliefs b WHERE b.tenant = e.tenant AND b.subject_id = e.entity_id
     AND b.status IN ({_COUNTED_SQL}) AND +b.object_entity_id IS NOT NULL
     AND +b.object_entity_id != b.subject_id)
  + (SELECT count(*) FROM beliefs b WHERE b.tenant = e.tenant
     AND b.object_entity_id = e.entity_id AND b.subject_id != e.entity_id
     AND b.status IN ({_COUNTED_SQL}))
FROM entities e WHERE e.tenant = ?
"""


def true_counts(conn: Connection, tenant: str,
                entity_ids: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    """``entity_id -> (belief_count, graph_degree)`` computed from the beliefs."""
    if entity_ids is None:
        rows = conn.execute(RECOUNT_SQL, (tenant,)).fetchall()
    else:
        ids = sorted(set(entity_ids))
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = conn.execute(RECOUNT_SQL + f" AND e.entity_id IN ({marks})",
                            (tenant, *ids)).fetchall()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def stored_counts(conn: Connection, tenant: str,
                  entity_ids: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    sql = "SELECT entity_id, belief_count, graph_degree FROM entities WHERE tenant = ?"
    args: list[Any] = [tenant]
    if entity_ids is not None:
        ids = sorted(set(entity_ids))
        sql += f" AND entity_id IN ({','.join('?' * len(ids))})"
        args.extend(ids)
    rows = conn.execute(sql, args).fetchall()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def recount(conn: Connection, tenant: str, entity_ids: Iterable[str] | None = None) -> int:
    """Set the stored counts from the beliefs (all entities when ``entity_ids`` is None).

    Returns how many entities had a wrong count. Call inside a transaction.
    """
    truth = true_counts(conn, tenant, entity_ids)
    stored = stored_counts(conn, tenant, truth if entity_ids is not None else None)
    wrong = [(b, d, tenant, e) for e, (b, d) in truth.items() if stored.get(e) != (b, d)]
    if wrong:
        conn.executemany("UPDATE entities SET belief_count = ?, graph_degree = ? "
                         "WHERE tenant = ? AND entity_id = ?", wrong)
    return len(wrong)


def count_drift(conn: Connection, tenant: str,
                ) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """Entities whose stored counts differ from a recount: ``id -> (stored, true)``."""
    truth = true_counts(conn, tenant)
    stored = stored_counts(conn, tenant)
    return {e: (stored[e], t) for e, t in truth.items() if stored.get(e) != t}
