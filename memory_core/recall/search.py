"""The ranked lists: keyword (the tenant's own bm25, ``recall.keyword``), dense (sqlite-vec)
and the entity bridge.

Every statement is a fixed string with bound parameters. Each function returns visible rows
of one kind, best first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

import numpy as np

from memory_core.db.sqlite import Connection
from memory_core.model.tenants import HUB
from memory_core.recall.candidates import TABLES, Candidate, Scope, beliefs_touching, load
from memory_core.recall.keyword import (
    HeldPostings,
    TermPlan,
    TermStats,
    fts,
    in_order,
    load_first,
    plan_terms,
)
from memory_core.vectors import VectorIndex

_EDGE = " \t.,;:!?\"'`()[]{}<>"
_LOOSE_EDGE = ",;:!?\"`()[]{}<>"
_POSSESSIVE_RE = re.compile(r"['’]s$")
MAX_BRIDGE_WORDS = 120
MAX_NGRAM = 3
# Dense search asks for more than it needs: some neighbours are filtered out afterwards
# (superseded beliefs, archived episodes, other times).
DENSE_OVERSAMPLE = 2

__all__ = ["HeldPostings", "TermPlan", "TermStats", "beliefs_about", "dense", "fts", "plan_terms",
           "query_entities"]


def dense(conn: Connection, index: VectorIndex, kind: str, scope: Scope, vector: np.ndarray,
          k: int, pool: Mapping[tuple[str, int], Candidate] | None = None,
          held: HeldPostings | None = None) -> list[Candidate]:
    """Nearest visible rows of ``kind`` by cosine distance, best first (``pool``: rows loaded
    already, see ``load_first``; ``held``: the tenant's vectors held in the process, searched
    instead of the vector table). May raise the driver's error for a broken vector table
    (the caller degrades to keyword-only)."""
    if k <= 0:
        return []
    table = TABLES[kind]
    hits = (held.nearest(table, vector, k * DENSE_OVERSAMPLE)
            if held is not None and held.holds_vectors(table)
            else index.search(conn, table, scope.tenant, vector, k * DENSE_OVERSAMPLE))
    return load_first(conn, kind, scope, [rowid for rowid, _ in hits], k, pool)


def _words(text: str) -> list[list[str]]:
    """Word sequences of ``text`` in the alias form (NFKC, case-folded): one with edge
    punctuation stripped and possessives cut, one keeping inner punctuation ("dr. smith")."""
    raw = unicodedata.normalize("NFKC", text).casefold().split()[:MAX_BRIDGE_WORDS]
    plain = [_POSSESSIVE_RE.sub("", w.strip(_EDGE)) for w in raw]
    loose = [w.strip(_LOOSE_EDGE) for w in raw]
    return [[w for w in plain if w], [w for w in loose if w]]


def _ngrams(text: str) -> list[str]:
    grams: dict[str, None] = {}
    for words in _words(text):
        for n in range(1, MAX_NGRAM + 1):
            for i in range(len(words) - n + 1):
                grams.setdefault(" ".join(words[i:i + n]), None)
    return list(grams)


def query_entities(conn: Connection, tenant: str, text: str, *,
                   include_hub: bool = False) -> list[str]:
    """Entity ids of the tenant named in ``text`` by a name, an alias or the id itself
    (the hub ``user`` only with ``include_hub``)."""
    grams = _ngrams(text)
    if not grams:
        return []
    variants = list(dict.fromkeys([*grams, *(g.replace(" ", "_") for g in grams)]))
    marks = ",".join("?" * len(variants))
    rows = conn.execute(
        f"SELECT entity_id FROM entity_aliases WHERE tenant = ? AND alias_norm IN ({marks}) "
        f"UNION SELECT entity_id FROM entities WHERE tenant = ? AND entity_id IN ({marks})",
        [tenant, *variants, tenant, *variants]).fetchall()
    return sorted({r[0] for r in rows if include_hub or r[0] != HUB})


def beliefs_about(conn: Connection, scope: Scope, entity_ids: Sequence[str],
                  k: int) -> list[Candidate]:
    """Visible beliefs whose subject or object is one of ``entity_ids``: most confident and
    most recent first."""
    ids = (scope.held.touching(scope, entity_ids, k) if scope.held is not None
           else [r[0] for r in beliefs_touching(conn, scope, entity_ids, "b.id", k)])
    return in_order(load(conn, "belief", scope, ids), ids)
