"""``mnemo memory explain``: why a memory exists, what it counts as, how recall used it.

Reads the state db (the row and its provenance) and the ops db (the recall log). The answer
holds ids, times, statuses and scores; the memory's own text only as the row's ``text``.
"""

from __future__ import annotations

from typing import Any

from memory_core.db.sqlite import Connection
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.recall.explain import recalls_of
from memory_core.validate import check_ident

_COUNTS_AS = {
    "active": "a currently valid belief: recalled, and counted in its entities",
    "conflict": "a belief in conflict with a more trusted one: recalled with uncertainty",
    "superseded": "history: it was valid until valid_to; recalled only with as_of",
    "invalidated": "withdrawn: kept for the record, never recalled",
    "pending_review": "waiting for review: stored, never recalled",
    "expired": "expired (a commitment past its date, or a review never done): kept for "
               "history, recalled only with as_of",
}
_TIERS = {
    "working": "an episode of the current chat session: recalled, favoured by tier",
    "recent": "a recent episode: recalled",
    "long_term": "a long-term episode: recalled",
    "archive": "archived: kept, not recalled unless asked",
}


def split_item_id(item_id: object) -> tuple[str | None, str]:
    """``belief:<uid>`` -> ("belief", uid); a bare uid -> (None, uid)."""
    if not isinstance(item_id, str) or not item_id:
        raise InvalidInputError("item id must be text like belief:b_..., episode:ep_... or "
                                "turn:<turn_uid>")
    kind, sep, uid = item_id.partition(":")
    if sep and kind in ("belief", "episode", "turn"):
        return kind, check_ident(uid, "item id")
    return None, check_ident(item_id, "item id")


def _fetch(conn: Connection, table: str, columns: str, uid_column: str, tenant: str,
           uid: str) -> dict[str, Any] | None:
    """One row of ``table`` as a dict; ``columns`` is a SQL column list (``x AS y`` renames)."""
    cur = conn.execute(f"SELECT {columns} FROM {table} WHERE tenant = ? AND {uid_column} = ?",
                       (tenant, uid))
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row, strict=True))


def _belief(conn: Connection, tenant: str, uid: str) -> dict[str, Any] | None:
    out = _fetch(conn, "beliefs",
                 "belief_uid AS uid, subject_id, predicate, object_text, object_entity_id, "
                 "text, valid_from, valid_to, recorded_at, retired_at, status, source, "
                 "confidence, turn_uid, expires_at, access_count, last_access_at",
                 "belief_uid", tenant, uid)
    if out is None:
        return None
    out["why"] = (f"extracted by the {out['source']} source from turn {out['turn_uid']}"
                  if out["turn_uid"] else f"written by the {out['source']} source")
    out["counts_as"] = _COUNTS_AS.get(out["status"], out["status"])
    return {"kind": "belief", **out}


def _episode(conn: Connection, tenant: str, uid: str) -> dict[str, Any] | None:
    out = _fetch(conn, "episodes",
                 "id, episode_uid AS uid, session_id, tier, text, occurred_at, importance, "
                 "access_count, last_access_at, created_at, expires_at", "episode_uid",
                 tenant, uid)
    if out is None:
        return None
    turns = [r[0] for r in conn.execute(
        "SELECT t.turn_uid FROM episode_turns et JOIN turns t ON t.id = et.turn_id WHERE "
        "et.episode_id = ? ORDER BY t.idx", (out.pop("id"),))]
    out.update(turn_uids=turns, why=f"recorded from turn(s) {', '.join(turns) or '-'}",
               counts_as=_TIERS.get(out["tier"], out["tier"]))
    return {"kind": "episode", **out}


def _turn(conn: Connection, tenant: str, uid: str) -> dict[str, Any] | None:
    out = _fetch(conn, "turns", "turn_uid AS uid, session_id, idx AS \"index\", speaker, "
                 "occurred_at, text", "turn_uid", tenant, uid)
    if out is None:
        return None
    out.update(why="the raw words of a chat turn, verbatim",
               counts_as="transcript: recalled by keyword only when memory has nothing")
    return {"kind": "turn", **out}


def explain_item(state: Any, ops: Any, tenant: str, item_id: str,
                 recent: int = 10) -> dict[str, Any]:
    """The row behind ``item_id``, why it exists, what it counts as, and its latest recalls.

    Raises NotFoundError when the tenant has no such memory.
    """
    kind, uid = split_item_id(item_id)
    finders = {"belief": _belief, "episode": _episode, "turn": _turn}
    for name in [kind] if kind else list(finders):
        found = finders[name](state, tenant, uid)
        if found is not None:
            full_id = f"{name}:{uid}"
            found["id"] = full_id
            found["recalls"] = recalls_of(ops, tenant, full_id, limit=recent)
            return found
    raise NotFoundError(f"no memory {item_id!r} in tenant {tenant!r}: use an id shown by "
                        "`mnemo recall` (belief:..., episode:..., turn:...)")


_TEXTS = {"belief": ("beliefs", "belief_uid", "text"),
          "episode": ("episodes", "episode_uid", "text"),
          "turn": ("turns", "turn_uid", "speaker || ': ' || text")}


def texts_of(conn: Connection, tenant: str, item_ids: list[str]) -> dict[str, str]:
    """The text of each of ``item_ids`` (``kind:uid``) the tenant still holds, by id: for
    showing an explanation to a person (the recall log itself never holds text)."""
    out: dict[str, str] = {}
    by_kind: dict[str, list[str]] = {}
    for item_id in dict.fromkeys(item_ids):
        kind, sep, uid = item_id.partition(":")
        if sep and kind in _TEXTS:
            by_kind.setdefault(kind, []).append(uid)
    for kind, uids in by_kind.items():
        table, column, text = _TEXTS[kind]
        for start in range(0, len(uids), 500):
            chunk = uids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for uid, body in conn.execute(
                    f"SELECT {column}, {text} FROM {table} WHERE tenant = ? AND {column} IN "
                    f"({marks})", [tenant, *chunk]):
                out[f"{kind}:{uid}"] = body
    return out
