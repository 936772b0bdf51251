"""One chat process of ``bench/primary_processes.py``: its share of the turns through
``Memory.after_turn``, a wait until every turn of the conversation is consolidated (by any
worker host), then a recall of every question; the ids go to ``recalled_<part>.json``.

Settings come from the environment (``MNEMO_STATE_BACKEND=postgres``, its own data dir).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from pathlib import Path

from memory_core.chat.memory import Memory
from memory_core.chat.post_turn import TurnSender
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--part", type=int, required=True)
    ap.add_argument("--parts", type=int, required=True)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--tenant", required=True)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    settings = Settings.from_env()
    turns = json.loads((args.dir / "turns.json").read_text())
    queries = json.loads((args.dir / "queries.json").read_text())
    with Memory.open(settings) as memory:
        memory._sender.close()
        memory._sender = TurnSender(settings, namespace=args.namespace)  # this run's queue
        for i, t in enumerate(turns):
            if i % args.parts == args.part:
                memory.after_turn(TurnInput(**(t | {
                    "occurred_at": datetime.fromisoformat(t["occurred_at"])})))
        conn = memory.state_db.conn
        deadline = time.monotonic() + args.timeout
        while conn.execute("SELECT count(*) FROM applied_jobs WHERE key LIKE ?",
                           (f"consolidate:{args.tenant}:%",)).fetchone()[0] < len(turns):
            if time.monotonic() > deadline:
                raise SystemExit(f"chat {args.part}: the workers did not finish in time")
            time.sleep(0.2)
        out = []
        for q in queries:
            result = memory.recall(q, tenant=args.tenant, budget=10)
            out.append([*(f.fact_id for f in result.facts), *(i.item_id for i in result.items)])
        memory.flush_recall_log()
    (args.dir / f"recalled_{args.part}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
