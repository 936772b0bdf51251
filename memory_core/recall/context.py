"""Neighbouring turns: the episodes just before and after the best hits, in the same session.

In a conversation the answer often sits next to the words that match the question (a
question and its reply, a photo and what is said about it). The episodes of the turns at
``idx +- 1..span`` around the best hits form the ``neighbour`` list, ranked by the hit they
sit next to, so fusion can lift them when nothing else points at them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.db.sqlite import Connection
from memory_core.recall.candidates import Candidate, Scope, episode_filter, load_new, param_marks


def _positions(conn: Connection, tenant: str, uids: Sequence[str]) -> dict[str, tuple[str, int]]:
    if not uids:
        return {}
    rows = conn.execute(
        "SELECT turn_uid, session_id, idx FROM turns WHERE tenant = ? AND turn_uid IN "
        f"({param_marks(len(uids))})", [tenant, *uids]).fetchall()
    return {r[0]: (r[1], int(r[2])) for r in rows}


def neighbours(conn: Connection, scope: Scope, top: Sequence[Candidate], span: int,
               pool: Mapping[tuple[str, int], Candidate] | None = None) -> list[Candidate]:
    """Visible episodes next to ``top`` (best first), excluding ``top`` itself; those
    ``pool`` holds already are its own objects, not read again."""
    if span <= 0 or not top:
        return []
    uids = [u for c in top for u in c.turn_uids]
    pos = _positions(conn, scope.tenant, uids)
    spots = list(dict.fromkeys(pos[u] for c in top for u in c.turn_uids if u in pos))
    cond, params = episode_filter(scope)
    by_pos: dict[tuple[str, int], int] = {}
    if spots:
        # One statement: an indexed range of turns per hit (an OR of ranges defeats the
        # index), then their episodes; CROSS JOIN keeps the planner from starting at
        # episodes.
        ranges = " UNION ALL ".join(
            ["SELECT id FROM turns WHERE tenant = ? AND session_id = ? AND idx BETWEEN ? AND ? "
             "AND idx != ?"] * len(spots))
        range_params = [p for session, idx in spots
                        for p in (scope.tenant, session, idx - span, idx + span, idx)]
        for s_id, t_idx, e_id in conn.execute(
                "SELECT t.session_id, t.idx, e.id FROM turns t CROSS JOIN episode_turns et "
                "ON et.turn_id = t.id CROSS JOIN episodes e ON e.id = et.episode_id WHERE "
                f"t.id IN ({ranges}) AND {cond}", [*range_params, *params]):
            by_pos[(s_id, int(t_idx))] = int(e_id)
    offsets = [d for d in sorted(range(-span, span + 1), key=abs) if d != 0]
    wanted = [(s, i + d) for s, i in spots for d in offsets]
    exclude = {c.row_id for c in top if c.kind == "episode"}
    ordered = [by_pos[w] for w in wanted if w in by_pos and by_pos[w] not in exclude]
    found = load_new(conn, "episode", scope, ordered, pool or {})
    return [found[i] for i in dict.fromkeys(ordered) if i in found]
