"""The Postgres primary against SQLite on one LoCoMo conversation: same turns, same beliefs?
same recall?

Both stores get the conversation's turns through the workers' write path (``process_turn``
then ``micro_consolidate``, in turn order, in this process); then every question of the
conversation is recalled from both through ``Memory`` (the chat process's API, each with its
own backend settings). Printed: the belief tables' equality (rows compared without row ids
and system time), overlap@10 of the recalled ids (facts and items: |SQLite top 10 ∩ Postgres
top 10| / |SQLite top 10|, averaged over questions), the ingest time of each and the
primary's psycopg calls per turn (``execute``: a round trip each).

    python bench/primary_parity.py --postgres postgresql://postgres@127.0.0.1:5432/test \\
        [--conversation 0] [--turns N] [--embedder hash|fastembed] [--data locomo_dev.json]

The Postgres database named is the server: a fresh database is made there and dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_data

from memory_core.backends import BackendURL, parse_backend_url
from memory_core.chat.memory import Memory
from memory_core.db import migrate_stores, open_state
from memory_core.embedders.base import Embedder
from memory_core.model.tenants import create_tenant
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write import pipeline

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / \
    "locomo_dev.json"
BELIEF_COLUMNS = ("tenant", "belief_uid", "subject_id", "predicate", "object_text",
                  "object_norm", "object_entity_id", "text", "valid_from", "valid_to",
                  "stated_valid_to", "status", "source", "confidence", "turn_uid", "negated")


def conversation_turns(conv: locomo_data.Conversation, limit: int | None) -> list[TurnInput]:
    out = []
    for session, turn in conv.turns():
        idx = int(turn.dia_id.split(":")[1])
        out.append(TurnInput(tenant=conv.tenant, session_id=f"session_{session.number}",
                             turn_uid=turn.dia_id, speaker=turn.speaker, text=turn.text,
                             occurred_at=session.at + timedelta(seconds=idx), index=idx))
    return out[:limit] if limit else out


@dataclass
class Statements:
    """The psycopg calls this process made: ``execute`` calls (a round trip each) and
    ``executemany`` calls (one pipelined batch each) with their rows."""

    execute: int = 0
    executemany: int = 0
    rows: int = 0


@contextlib.contextmanager
def counting_statements() -> Iterator[Statements]:
    """Count psycopg's cursor calls while the block runs (psycopg only loads with the
    primary; nothing is counted on SQLite)."""
    import psycopg

    seen = Statements()
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.execute += 1
        return execute(self, *args, **kwargs)

    def counted_executemany(self: Any, query: Any, params: Any, **kwargs: Any) -> Any:
        batch = list(params)
        seen.executemany += 1
        seen.rows += len(batch)
        return executemany(self, query, batch, **kwargs)

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]


def ingest(settings: Settings, tenant: str, turns: list[TurnInput],
           embedder: Embedder, seen: Statements | None = None) -> float:
    """What the workers do per turn, in order; the seconds it took (``seen``: count the
    psycopg calls of the turns alone)."""
    migrate_stores(settings)
    db = open_state(settings)
    try:
        index = VectorIndex(embedder)
        index.claim(db.conn, "parity")
        create_tenant(db.conn, tenant)
        with counting_statements() if seen is not None else contextlib.nullcontext() as got:
            start = time.perf_counter()
            for t in turns:
                pipeline.process_turn(db, index, t)
                pipeline.micro_consolidate(db, index, tenant, t.session_id,
                                           turn_uid=t.turn_uid)
            took = time.perf_counter() - start
        if seen is not None and got is not None:
            seen.execute, seen.executemany, seen.rows = got.execute, got.executemany, got.rows
        return took
    finally:
        db.close()


def belief_rows(settings: Settings) -> list[tuple[Any, ...]]:
    db = open_state(settings, migrate=False, readonly=True)
    try:
        rows = db.conn.execute(f"SELECT {', '.join(BELIEF_COLUMNS)} FROM beliefs").fetchall()
        return sorted((tuple(r) for r in rows), key=repr)
    finally:
        db.close()


def recalled(settings: Settings, embedder: Embedder, tenant: str,
             queries: list[str]) -> list[list[str]]:
    with Memory.open(settings, embedder=embedder) as memory:
        out = []
        for q in queries:
            result = memory.recall(q, tenant=tenant, budget=10)
            out.append([*(f.fact_id for f in result.facts), *(i.item_id for i in result.items)])
        memory.flush_recall_log()
    return out


def overlap_at(a: list[list[str]], b: list[list[str]], k: int = 10) -> float:
    scores = [len(set(x[:k]) & set(y[:k])) / len(x[:k]) for x, y in zip(a, b, strict=True)
              if x]
    return sum(scores) / len(scores) if scores else 1.0


@dataclass
class Parity:
    turns: int
    beliefs_sqlite: int
    beliefs_postgres: int
    beliefs_equal: bool
    questions: int
    overlap_at_10: float
    ingest_s_sqlite: float
    ingest_s_postgres: float
    statements: Statements


@contextlib.contextmanager
def fresh_database(server: BackendURL) -> Iterator[BackendURL]:
    import psycopg

    name = f"mnemo_parity_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = {"host": server.host, "port": server.port, "user": server.user,
             "dbname": server.database, "autocommit": True}
    with psycopg.connect(**admin) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield parse_backend_url("postgres", "--postgres", f"postgresql://{server.user}@"
                                f"{server.host_for_url}:{server.port}/{name}")
    finally:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(conv: locomo_data.Conversation, pg_url: BackendURL, embedder: Embedder, root: Path,
        limit: int | None = None) -> Parity:
    turns = conversation_turns(conv, limit)
    lite = Settings.from_env({}, data_dir=root / "sqlite")
    prim = Settings.from_env({}, data_dir=root / "postgres", state_backend="postgres",
                             postgres_url=pg_url.canonical)
    seen = Statements()
    t_lite = ingest(lite, conv.tenant, turns, embedder)
    t_prim = ingest(prim, conv.tenant, turns, embedder, seen)
    known = {t.turn_uid for t in turns}
    queries = [q.text for q in conv.questions if set(q.evidence) <= known]
    a, b = belief_rows(lite), belief_rows(prim)
    ra = recalled(lite, embedder, conv.tenant, queries)
    rb = recalled(prim, embedder, conv.tenant, queries)
    return Parity(len(turns), len(a), len(b), a == b, len(queries), overlap_at(ra, rb),
                  t_lite, t_prim, seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", required=True, help="postgresql://USER@HOST[:PORT]/DB")
    ap.add_argument("--conversation", type=int, default=0)
    ap.add_argument("--turns", type=int, default=0, help="only the first N turns")
    ap.add_argument("--embedder", choices=("hash", "fastembed"), default="hash")
    ap.add_argument("--data", type=Path, default=DATA, help="LoCoMo's locomo_dev.json")
    args = ap.parse_args()
    from memory_core.embedders.factory import make_embedder

    model = DATA.parent.parent.parent / "models" / "all-MiniLM-L6-v2-onnx"
    settings = Settings.from_env({}, embedder=args.embedder, **(
        {"embed_model_path": model, "embed_model": "sentence-transformers/all-MiniLM-L6-v2"}
        if args.embedder == "fastembed" else {}))
    embedder = make_embedder(settings)
    embedder.load()
    conv = locomo_data.load(args.data)[args.conversation]
    server = parse_backend_url("postgres", "--postgres", args.postgres)
    with fresh_database(server) as url, tempfile.TemporaryDirectory() as tmp:
        p = run(conv, url, embedder, Path(tmp), args.turns or None)
    print(f"conversation {conv.sample_id}: {p.turns} turns, {p.questions} questions, "
          f"embedder {args.embedder}")
    print(f"beliefs: sqlite {p.beliefs_sqlite}, postgres {p.beliefs_postgres}, "
          f"equal: {p.beliefs_equal}")
    print(f"recall overlap@10 (postgres vs sqlite): {p.overlap_at_10:.3f}")
    print(f"ingest: sqlite {p.ingest_s_sqlite:.1f} s, postgres {p.ingest_s_postgres:.1f} s "
          f"(ratio {p.ingest_s_postgres / max(p.ingest_s_sqlite, 1e-9):.2f})")
    n = max(p.turns, 1)
    print(f"postgres statements per turn: {p.statements.execute / n:.1f} execute (a round "
          f"trip each) + {p.statements.executemany / n:.1f} executemany "
          f"({p.statements.rows / n:.1f} rows)")


if __name__ == "__main__":
    main()
