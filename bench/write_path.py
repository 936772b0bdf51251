"""Throughput of the whole write path (a script, not a test).

Example:
    .venv/bin/python bench/write_path.py
    .venv/bin/python bench/write_path.py --turns 10000 --batch 64

Generates realistic chat turns (several sessions, user and assistant, facts that change over
time) and pushes them through ``pipeline.process_turns``: raw turn + episode + heuristic
extraction + beliefs (rules, entities, ego anchors, counts) + FTS + vectors (hash embedder) +
outbox, in batches. Prints turns/s and the database size per 1,000 turns.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from memory_core.db import open_state  # noqa: E402
from memory_core.embedders import HashEmbedder  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.model.turns import TurnInput  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402
from memory_core.write.pipeline import process_turns  # noqa: E402

NAMES = ["Ana", "Ben", "Chloe", "Dmitri", "Emeka", "Fatima", "Gus", "Hana", "Ivo", "Jun"]
PLACES = ["Lisbon", "Berlin", "Osaka", "Nairobi", "Toronto", "Porto", "Krakow", "Austin"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries"]
THINGS = ["jazz", "hiking", "sushi", "chess", "gardening", "climbing", "pottery", "tennis"]
USER_TEMPLATES = [
    "I live in {place} now, moved there last month.",
    "My sister {name} works at a hospital in {place}.",
    "I work at {company} as an engineer.",
    "I really love {thing}, it keeps me sane.",
    "My friend {name} lives in {place}.",
    "Remind me to call {name} about the garden project on Friday.",
    "I'm allergic to peanuts, so please keep that in mind for recipes.",
    "Can you summarise what we decided about the kitchen renovation?",
    "{name} and I started the marathon training in May; it's going slowly.",
    "My name is Sam, by the way.",
    "What's a good recipe for dinner tonight? Something quick please.",
    "I have a dog named Rex.",
]
ASSISTANT_TEMPLATES = [
    "Got it, I'll remember that.",
    "Here is a quick summary of what we discussed about {thing}.",
    "That sounds great! How long have you been into {thing}?",
    "Sure, here's a simple recipe with rice, vegetables and a bit of soy sauce.",
]


def generate(n: int, tenants: list[str], seed: int = 7) -> list[TurnInput]:
    rnd = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    turns = []
    for i in range(n):
        tenant = tenants[i % len(tenants)]
        session = f"s{(i // len(tenants)) // 40}"
        user = i % 2 == 0
        pool = USER_TEMPLATES if user else ASSISTANT_TEMPLATES
        text = rnd.choice(pool).format(name=rnd.choice(NAMES), place=rnd.choice(PLACES),
                                       company=rnd.choice(COMPANIES), thing=rnd.choice(THINGS))
        turns.append(TurnInput(tenant=tenant, session_id=session, turn_uid=f"t{i:07d}",
                               speaker="user" if user else "assistant", text=text,
                               occurred_at=start + timedelta(minutes=3 * i)))
    return turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp))
        db = open_state(settings)
        tenants = [f"bench{i}" for i in range(args.tenants)]
        for tenant in tenants:
            create_tenant(db.conn, tenant)
        index = VectorIndex(HashEmbedder(dim=args.dim))
        turns = generate(args.turns, tenants)
        began = time.perf_counter()
        beliefs = 0
        for start in range(0, len(turns), args.batch):
            for outcome in process_turns(db, index, turns[start:start + args.batch]):
                beliefs += len(outcome.belief_ids)
        elapsed = time.perf_counter() - began
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = sum(p.stat().st_size for p in Path(tmp).glob("memory_state.db*"))
        rows = {t: db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("turns", "episodes", "entities", "beliefs", "outbox")}
        db.close()
    print(f"turns: {args.turns}  batch: {args.batch}  tenants: {args.tenants}  "
          f"embedder: hash dim={args.dim}")
    print(f"elapsed: {elapsed:.2f} s  throughput: {args.turns / elapsed:,.0f} turns/s")
    print(f"rows: {rows}  belief ids returned: {beliefs}")
    print(f"database size: {size / 1e6:.1f} MB total, "
          f"{size / 1e6 / (args.turns / 1000):.2f} MB per 1,000 turns")


if __name__ == "__main__":
    main()
