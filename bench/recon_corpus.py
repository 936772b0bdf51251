"""The corpus of ``bench/reconsolidation.py``: N beliefs over N/10 subjects, written fast.

Shortcut (documented in docs/benchmarks.md): rows go straight into the real schema of a
migrated state db with ``executemany``, but each row is what the write path would leave,
computed with the model's own pure rules: entity ids from ``mint_id``, belief keys from
``content_key`` / ``anchor_key``, texts from ``render_text`` / ``episode_text``, statuses and
``valid_to`` from ``resolve_slot``, counts from ``count_contribution``, the ego anchor of
every subject, and hash-embedder vectors (dim 16) in the sqlite-vec tables. FTS rows come
from the schema's own triggers. Turns and episodes are what a bulk ingest leaves: one
episode per turn, small talk repeated across the sessions of a day never merged.

On top, a few defects for the job to repair: 1 belief in 1,000 with a stale key, 1 in 2,000
with a stale copy, 1 row in 200 without its vector, a wrong count on every hub.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_core.clock import to_db
from memory_core.db.sqlite import atomic
from memory_core.model.belief_rules import (
    SlotBelief,
    anchor_key,
    content_key,
    count_contribution,
    importance,
    normalize_object,
    render_text,
    resolve_slot,
)
from memory_core.model.entities import mint_id
from memory_core.model.episodes import episode_text, episode_uid
from memory_core.model.hygiene import normalize_label
from memory_core.model.tenants import HUB, create_tenant
from memory_core.vectors import VectorIndex

T0 = datetime(2023, 1, 1, tzinfo=UTC)
STAMP = to_db(datetime(2024, 1, 1, tzinfo=UTC))
PLACES = ("Lisbon", "Berlin", "Osaka", "Nairobi", "Toronto", "Porto", "Krakow", "Austin",
          "Lima", "Hanoi", "Oslo", "Accra", "Quito", "Perth", "Cork", "Bergen")
TITLES = ("nurse", "teacher", "engineer", "baker", "pilot", "designer", "chef", "lawyer")
LANGS = ("English", "Portuguese", "Japanese", "Swahili", "French", "Polish", "Spanish")
SMALL_TALK = ("ok thanks", "good morning", "sounds good", "haha", "see you later", "yes")
_BELIEF_COLS = ("tenant, belief_uid, subject_id, predicate, object_text, object_norm, "
                "object_entity_id, negated, text, valid_from, valid_to, stated_valid_to, "
                "recorded_at, retired_at, status, source, confidence, turn_uid, expires_at")


class Writer:
    """Buffers rows and their vector texts; flushes in one transaction per chunk."""

    def __init__(self, conn: Any, index: VectorIndex, chunk: int = 20_000) -> None:
        self.conn, self.index, self.chunk = conn, index, chunk
        self.beliefs: list[tuple[Any, ...]] = []
        self.n = 0

    def belief(self, row: tuple[Any, ...]) -> None:
        self.beliefs.append(row)
        if len(self.beliefs) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if not self.beliefs:
            return
        rows, self.beliefs = self.beliefs, []
        vectors = self.index.embedder.embed([r[8] for r in rows])
        with atomic(self.conn):
            first = self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM beliefs").fetchone()[0]
            self.conn.executemany(f"INSERT INTO beliefs ({_BELIEF_COLS}) VALUES "
                                  f"({','.join('?' * 19)})", rows)
            items = [(first + i, r[0], v) for i, (r, v) in enumerate(zip(rows, vectors,
                                                                         strict=True))
                     if (self.n + i) % 200 != 7]  # 1 in 200 left without a vector
            self.index.upsert(self.conn, "beliefs", items)
        self.n += len(rows)


def _subject_beliefs(tenant: str, sid: str, name: str, places: dict[str, str],
                     rng: random.Random, day0: datetime) -> list[tuple[Any, ...]]:
    """The 9 statements of one subject plus its ego anchor, as the write path stores them."""
    stated: list[tuple[str, str, str | None, datetime, str]] = []
    for k, place in enumerate(rng.sample(PLACES, 3)):
        stated.append(("lives_in", place, places[place], day0 + timedelta(days=100 * k),
                       "user_explicit"))
    for k, title in enumerate(rng.sample(TITLES, 2)):
        stated.append(("job_title_is", title, None, day0 + timedelta(days=150 * k),
                       "heuristic"))
    for k, lang in enumerate(rng.sample(LANGS, 2)):
        stated.append(("speaks", lang, None, day0 + timedelta(days=7 * k), "heuristic"))
    stated.append(("plans_to", f"visit {rng.choice(PLACES)}", None, day0 + timedelta(days=30),
                   "llm_inferred"))
    stated.append(("nationality_is", rng.choice(("Portuguese", "Kenyan", "Peruvian")), None,
                   day0, "user_explicit"))
    rows = []
    for pred, obj, obj_id, when, source in stated:
        norm = normalize_object(obj)
        vf = to_db(when)
        rows.append([tenant, content_key(tenant, sid, pred, norm, vf, source), sid, pred, obj,
                     norm, obj_id, 0, render_text(name, pred, obj), vf, None, None, STAMP,
                     None, "active", source, 0.9, None, None])
    _resolve(rows)
    first = min(r[9] for r in rows)
    rows.append([tenant, anchor_key(tenant, sid), HUB, "related_to", name,
                 normalize_object(name), sid, 0, render_text("user", "related_to", name),
                 first, None, None, STAMP, None, "active", "system_tool", 1.0, None, None])
    return [tuple(r) for r in rows]


def _resolve(rows: list[list[Any]]) -> None:
    """Statuses and valid_to from the model's slot rule, per (predicate) of one subject."""
    from memory_core.model.predicates import PREDICATES

    by_pred: dict[str, list[list[Any]]] = defaultdict(list)
    for r in rows:
        by_pred[r[3]].append(r)
    for pred, members in by_pred.items():
        result = resolve_slot([SlotBelief(r[1], r[5], r[9], r[15], "active") for r in members],
                              PREDICATES[pred].functional)
        for r in members:
            res = result[r[1]]
            r[14], r[10] = res.status, res.valid_to
            r[13] = None if res.status == "active" else STAMP


def build(conn: Any, index: VectorIndex, n_beliefs: int, tenants: int = 4,
          seed: int = 11) -> dict[str, int]:
    """Write the corpus; returns row counts."""
    rng = random.Random(seed)
    index.ensure(conn)
    names = [f"t{k}" for k in range(tenants)]
    for tenant in names:
        create_tenant(conn, tenant)
    subjects = n_beliefs // 10
    writer = Writer(conn, index)
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for tenant in names:
        places = _places(conn, tenant)
        ents: list[tuple[Any, ...]] = []
        for s in range(subjects // tenants):
            name = f"Person {tenant} {s:06d}"
            sid = mint_id(tenant, normalize_label(name))
            ents.append((tenant, sid, name))
            for row in _subject_beliefs(tenant, sid, name, places, rng,
                                        T0 + timedelta(days=s % 300)):
                writer.belief(row)
                for e, (b, d) in count_contribution(row[14], row[2], row[6]).items():
                    counts[(tenant, e)][0] += b
                    counts[(tenant, e)][1] += d
            if len(ents) >= 20_000:
                _entities(conn, ents)
        _entities(conn, ents)
    writer.flush()
    _defects_and_counts(conn, counts)
    turns = _turns(conn, index, names, n_beliefs // 4, rng)
    return {"beliefs": writer.n, "subjects": subjects, "turns": turns}


def _places(conn: Any, tenant: str) -> dict[str, str]:
    ents = [(tenant, mint_id(tenant, normalize_label(p)), p) for p in PLACES]
    ids = {name: eid for _, eid, name in ents}
    _entities(conn, ents)
    return ids


def _entities(conn: Any, ents: list[tuple[Any, ...]]) -> None:
    with atomic(conn):
        conn.executemany("INSERT INTO entities (tenant, entity_id, name, kind, created_at, "
                         "updated_at) VALUES (?, ?, ?, 'thing', ?, ?)",
                         [(t, e, n, STAMP, STAMP) for t, e, n in ents])
        conn.executemany("INSERT INTO entity_aliases (tenant, alias_norm, entity_id, label, "
                         "created_at) VALUES (?, ?, ?, ?, ?)",
                         [(t, normalize_label(n), e, n, STAMP) for t, e, n in ents])
    ents.clear()


def _defects_and_counts(conn: Any, counts: dict[tuple[str, str], list[int]]) -> None:
    with atomic(conn):
        conn.executemany("UPDATE entities SET belief_count = ?, graph_degree = ? WHERE "
                         "tenant = ? AND entity_id = ?",
                         [(b + (3 if e == HUB else 0), d, t, e)
                          for (t, e), (b, d) in counts.items()])
        conn.execute("UPDATE beliefs SET belief_uid = 'b_legacy_' || id WHERE id % 1000 = 3")
        conn.execute(f"INSERT INTO beliefs ({_BELIEF_COLS}) SELECT tenant, 'b_copy_' || id, "
                     "subject_id, predicate, object_text, object_norm, object_entity_id, "
                     "negated, text, valid_from, valid_to, stated_valid_to, recorded_at, "
                     "retired_at, status, source, 0.5, turn_uid, expires_at FROM beliefs "
                     "WHERE id % 2000 = 11 AND source != 'system_tool'")


def _turn_stream(tenants: list[str], n: int, rng: random.Random
                 ) -> Iterator[tuple[str, str, str, int, str, datetime]]:
    """(tenant, session, uid, idx, text, when): 20 turns a session, 4 sessions a day."""
    per = n // len(tenants)
    for tenant in tenants:
        for i in range(per):
            session, idx = divmod(i, 20)
            when = T0 + timedelta(hours=6 * session, minutes=idx)
            text = (rng.choice(SMALL_TALK) if rng.random() < 0.1 else
                    f"Person {tenant} {rng.randrange(10**6):06d} told me about "
                    f"{rng.choice(PLACES)} and {rng.choice(TITLES)} work, turn {i}")
            yield tenant, f"s{session:06d}", f"{tenant}-u{i:08d}", idx, text, when


def _turns(conn: Any, index: VectorIndex, tenants: list[str], n: int,
           rng: random.Random) -> int:
    last_session = {t: f"s{(n // len(tenants) - 1) // 20:06d}" for t in tenants}
    batch: list[tuple[Any, ...]] = []
    total = 0
    for item in _turn_stream(tenants, n, rng):
        batch.append(item)
        if len(batch) >= 20_000:
            total += _write_turns(conn, index, batch, last_session)
    return total + _write_turns(conn, index, batch, last_session)


def _write_turns(conn: Any, index: VectorIndex, batch: list[tuple[Any, ...]],
                 last_session: dict[str, str]) -> int:
    texts = [episode_text("user", b[4], to_db(b[5])) for b in batch]
    vectors = index.embedder.embed(texts)
    items = []
    with atomic(conn):
        for (tenant, session, uid, idx, text, when), body, vec in zip(batch, texts, vectors,
                                                                     strict=True):
            at = to_db(when)
            turn_id = conn.execute(
                "INSERT INTO turns (tenant, turn_uid, session_id, idx, speaker, occurred_at, "
                "text, recorded_at) VALUES (?, ?, ?, ?, 'user', ?, ?, ?)",
                (tenant, uid, session, idx, at, text, STAMP)).lastrowid
            tier = "working" if session == last_session[tenant] else "recent"
            ep = conn.execute(
                "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, "
                "occurred_at, importance, access_count, created_at, updated_at) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                (tenant, episode_uid(tenant, uid), session, tier, body, at,
                 importance(text, has_beliefs=False, explicit=False), STAMP, STAMP)).lastrowid
            conn.execute("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                         (ep, turn_id))
            if ep % 200 != 5:  # 1 in 200 left without a vector
                items.append((ep, tenant, vec))
        index.upsert(conn, "episodes", items)
    n = len(batch)
    batch.clear()
    return n
