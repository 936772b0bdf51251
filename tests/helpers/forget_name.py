"""A tenant whose user is called Maya, told about in every way a name reaches the user: the
helpers the deletion tests of both engines share (``tests/test_deletion.py`` on SQLite,
``tests/primary/test_deletion.py`` on the Postgres primary)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memory_core.model.beliefs import BeliefInput, mutate_belief
from memory_core.recall import keyword
from memory_core.vectors import stored_vector
from tests.helpers.memory import Store, day

NAME = "Maya"
# (subject, predicate, object, negated): beliefs written with mutate_belief (no turn: the
# only words about Maya are the beliefs, so nothing else may hold the name afterwards).
TOLD = [
    ("Tom", "friend_of", "Maya", False),  # before the name is known: a person shell "Maya"
    ("I", "name_is", "Maya", False),  # the shell merges into the hub (a merge ledger row)
    ("Maya", "lives_in", "Porto", False),  # the user as subject, by name
    ("Maya's sister", "has_sibling", "Maya", False),  # named for the user; the user object
    ("Anna", "friend_of", "Maya", False),  # the user as object, by name, once known
    ("Ben", "colleague_of", "Maya", True),  # negated: no object entity, the name as text
    ("Carl", "friend_of", "me", False),  # the user as object, not by name: stays "me"
]


def tell(store: Store, tenant: str = "t1") -> str:
    """Write ``TOLD``; returns the uid of the name belief."""
    uid = ""
    for i, (subject, predicate, obj, negated) in enumerate(TOLD):
        out = mutate_belief(store.conn, store.index, tenant,
                            BeliefInput(subject, predicate, obj, day(i), negated=negated))
        if predicate == "name_is":
            uid = str(out.belief_uid)
    return uid


def texts(store: Store, tenant: str = "t1") -> set[str]:
    return {r[0] for r in store.conn.execute("SELECT text FROM beliefs WHERE tenant = ?",
                                             (tenant,)).fetchall()}


def keyword_hits(store: Store, word: str, tenant: str = "t1") -> dict[str, list[int]]:
    """What a keyword search of ``word`` finds in each full-text index of ``tenant``."""
    plan = keyword.TermPlan((word,))
    return {t: keyword.ranked_ids(store.conn, t, tenant, plan, 0)
            for t in ("beliefs", "episodes", "turns")}


def stale_vectors(store: Store, tenant: str = "t1") -> list[str]:
    """The tenant's beliefs whose stored vector is not their text's."""
    table = store.index._active_table(store.conn, "beliefs")
    vectors = {int(r[0]): stored_vector(r[1]) for r in store.conn.execute(
        f"SELECT rowid, embedding FROM {table} WHERE tenant = ?", (tenant,)).fetchall()}
    stale = []
    for row_id, text in store.conn.execute("SELECT id, text FROM beliefs WHERE tenant = ?",
                                           (tenant,)).fetchall():
        want = store.index.embedder.embed([text])[0]
        if row_id not in vectors or not np.allclose(vectors[row_id], want, atol=1e-3):
            stale.append(text)
    return stale


def rows_of(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, params).fetchall()]
