"""Keyword ranking in C against the same in Python, search by search (a script).

Example:
    .venv/bin/python bench/bm25_in_c.py --data /tmp/mnemo-scale-cache/single-100000-g1

Runs ``--recalls`` recalls of ``bench/recall_scale.py``'s questions on a store it generated
(``--data``, its ``--cache`` directory's ``single-<size>-g1``) to capture the keyword searches
they make (``recall.keyword.ranked_ids``), then computes each search's ranked ids both ways
on the same connection: with mnemo's SQLite extension (``memory_core/db/bm25.c``: FTS5
ranks in C, only ids come back) and without it (the postings to Python, bm25 there: the
fallback when the install could not build the extension, or ``MNEMO_SQLITE_BM25=false``).
Prints how many searches gave the same ids in the same order (tests/test_keyword_c.py
checks that on generated stores), and each way's CPU time per recall by search: the belief
and episode lists, the feedback round, the raw-turn fallback when it runs. Needs the
extension built (``pip install -e .`` with a C compiler and sqlite3ext.h).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for extra in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import recall_scale as rs  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.db.sqlite import BM25_LOADED  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.recall import keyword  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

KINDS = ("belief", "episode", "feedback", "turn")  # a recall's keyword searches


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True,
                   help="a store bench/recall_scale.py generated (its --cache directory's "
                        "single-<size>-g1)")
    p.add_argument("--recalls", type=int, default=80)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    settings = Settings.from_env({}, data_dir=args.data, log_level="error")
    configure_logging(settings)
    texts = rs.Texts(99, vocabulary_seed=rs.GENERATE_SEED)
    searches: list[tuple[Any, ...]] = []
    kinds: list[str] = []  # per search: belief, episode (first round), feedback, turn
    this_recall: list[str] = []
    ranked_ids = keyword.ranked_ids

    def capture(conn: Any, *search: Any) -> list[int]:
        table = search[0]
        kind = {"beliefs": "belief", "turns": "turn"}.get(
            table, "feedback" if "episode" in this_recall else "episode")
        this_recall.append(kind)
        kinds.append(kind)
        searches.append(search)
        return ranked_ids(conn, *search)

    with Memory.open(settings) as mem:
        conn = mem._state.conn
        if not getattr(conn, BM25_LOADED, False):
            sys.exit("mnemo's bm25 extension is not loaded: build it (pip install -e . with "
                     "a C compiler and sqlite3ext.h) and leave MNEMO_SQLITE_BM25 unset")
        keyword.ranked_ids = capture  # type: ignore[assignment]
        try:
            for _ in range(args.recalls):
                this_recall.clear()
                mem.recall(texts.question(), tenant=rs.TENANT)
        finally:
            keyword.ranked_ids = ranked_ids

        def way(in_c: bool) -> Any:
            def run(search: tuple[Any, ...]) -> list[int]:
                setattr(conn, BM25_LOADED, in_c)
                try:
                    return ranked_ids(conn, *search)
                finally:
                    setattr(conn, BM25_LOADED, True)
            return run

        ways = {"python (postings to Python)": way(False), "C (mnemo_bm25)": way(True)}
        same = sum(ways["python (postings to Python)"](s) == ways["C (mnemo_bm25)"](s)
                   for s in searches)
        print(f"{len(searches)} keyword searches of {args.recalls} recalls; the same ids in "
              f"the same order: {same}")
        print("| way (CPU per recall) | " + " | ".join(f"{k} ms" for k in KINDS) +
              " | all ms |")
        print("|---|" + "---:|" * (len(KINDS) + 1))
        for _ in range(args.rounds):
            for name, fn in ways.items():
                spent: dict[str, list[float]] = {k: [] for k in KINDS}
                for kind, search in zip(kinds, searches, strict=True):
                    started = time.thread_time()
                    fn(search)
                    spent[kind].append((time.thread_time() - started) * 1000)
                # per recall: the mean search of each kind times how many a recall makes
                per_recall = [sum(spent[k]) / args.recalls for k in KINDS]
                print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in per_recall) +
                      f" | {sum(per_recall):.2f} |", flush=True)
    print(f"CPU reference {rs.cpu_reference_ms()} ms (8.5 on a quiet day)")


if __name__ == "__main__":
    main()
