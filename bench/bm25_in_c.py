"""bm25 in C inside SQLite, measured against ``recall.keyword.ranked_ids`` (a script).

Example:
    .venv/bin/python bench/bm25_in_c.py --data /tmp/mnemo-scale-cache/single-100000-g1

Compiles ``bench/bm25_in_c.c`` (an FTS5 auxiliary function taking the tenant's N and
average length: FTS5's own ``bm25()`` takes both from the whole index, so every tenant) with
the system C compiler into a temporary directory, runs ``--recalls`` recalls of
``bench/recall_scale.py``'s questions on a store it generated (``--data``, its ``--cache``
directory's ``single-<size>-g1``) to capture the keyword searches they make, then for each
search computes the ranked ids both ways: ``ranked_ids`` (postings to Python, bm25 there)
and one FTS5 query ranking in C (``ORDER BY tbm25(...)``; the rows of a rare term first,
then the newest rows of the common terms alone, as ``ranked_ids`` orders them). Prints how
many searches gave the same ids in the same order, and each way's CPU time per recall by
search (the belief and episode lists, the feedback round, the raw-turn fallback when it
runs), whole and cut to the first 120 ids (what a list of 60 loads first). Needs a C
compiler and ``sqlite3ext.h`` (Debian: libsqlite3-dev). Nothing in mnemo uses the
extension: shipping it would need a build step, the loading in ``db.sqlite.connect`` and
``ranked_ids`` kept as the fallback that gives the same order.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for extra in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import recall_scale as rs  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.db import fts as fts_index  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.recall import keyword  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

SOURCE = Path(__file__).with_name("bm25_in_c.c")
KINDS = ("belief", "episode", "feedback", "turn")  # a recall's keyword searches
_RANK = ("SELECT rowid, tbm25({t}_fts, ?, ?, ?) AS s FROM {t}_fts WHERE {t}_fts MATCH ? "
         "ORDER BY s DESC, rowid DESC{limit}")
_FILL = ("SELECT rowid, tbm25({t}_fts, ?, ?, ?) FROM {t}_fts WHERE {t}_fts MATCH ? "
         "ORDER BY rowid DESC LIMIT ?")


def compile_extension(out_dir: Path, cc: str) -> Path:
    """The shared library; its entry point ``sqlite3_tbm_init`` follows from its name."""
    lib = out_dir / "tbm.so"
    subprocess.run([cc, "-O2", "-fPIC", "-shared", str(SOURCE), "-o", str(lib), "-lm"],
                   check=True)
    return lib


def ranked_in_c(conn: Any, table: str, tenant: str, plan: keyword.TermPlan, window: int,
                limit: int | None = None) -> list[int]:
    """``ranked_ids``'s order from FTS5: the rows holding a rare (essential) token by bm25
    over every token (the common ones are phrases of the MATCH expression that match only
    where a rare one does, so their positions count), then the newest ``window`` rows of
    the common tokens alone, by bm25 over those."""
    by_word = keyword.word_tokens(tenant, (*plan.essential, *plan.other))
    ess = list(dict.fromkeys(by_word[w] for w in plan.essential if w in by_word))
    oth = [t for t in dict.fromkeys(by_word.values()) if t not in ess]
    rows, total = fts_index.tenant_stats(conn, table, tenant)
    if rows <= 0 or not (ess or oth):
        return []
    avgdl = total / rows if total > 0 else 1.0
    out: list[int] = []
    if ess:
        rare = keyword._phrases(ess)
        match = rare if not oth else f"{rare} OR ({keyword._phrases(oth)} AND {rare})"
        sql = _RANK.format(t=table, limit=f" LIMIT {int(limit)}" if limit else "")
        out += [r[0] for r in conn.execute(sql, (rows, avgdl, len(ess) + len(oth), match))]
    if oth and window > 0:
        match = keyword._phrases(oth) + (f" NOT {keyword._phrases(ess)}" if ess else "")
        fill = conn.execute(_FILL.format(t=table), (rows, avgdl, len(oth), match, window))
        out += [-doc for _, doc in sorted((-score, -doc) for doc, score in fill)]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True,
                   help="a store bench/recall_scale.py generated (its --cache directory's "
                        "single-<size>-g1)")
    p.add_argument("--recalls", type=int, default=80)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--cc", default="cc")
    args = p.parse_args()
    settings = Settings.from_env({}, data_dir=args.data, log_level="error")
    configure_logging(settings)
    texts = rs.Texts(99, vocabulary_seed=rs.GENERATE_SEED)
    searches: list[tuple[Any, ...]] = []
    kinds: list[str] = []  # per search: belief, episode (first round), feedback, turn
    this_recall: list[str] = []
    python_ranked = keyword.ranked_ids

    def capture(conn: Any, *search: Any) -> list[int]:
        table = search[0]
        kind = {"beliefs": "belief", "turns": "turn"}.get(
            table, "feedback" if "episode" in this_recall else "episode")
        this_recall.append(kind)
        kinds.append(kind)
        searches.append(search)
        return python_ranked(conn, *search)

    with tempfile.TemporaryDirectory() as tmp, Memory.open(settings) as mem:
        lib = compile_extension(Path(tmp), args.cc)
        keyword.ranked_ids = capture  # type: ignore[assignment]
        try:
            for _ in range(args.recalls):
                this_recall.clear()
                mem.recall(texts.question(), tenant=rs.TENANT)
        finally:
            keyword.ranked_ids = python_ranked
        conn = mem._state.conn
        conn.enable_load_extension(True)
        conn.load_extension(str(lib))
        conn.enable_load_extension(False)
        same = sum(python_ranked(conn, *s) == ranked_in_c(conn, *s) for s in searches)
        print(f"{len(searches)} keyword searches of {args.recalls} recalls; the same ids in "
              f"the same order: {same}")
        ways = {"python (ranked_ids)": lambda s: python_ranked(conn, *s),
                "C, every id": lambda s: ranked_in_c(conn, *s),
                "C, first 120 ids": lambda s: ranked_in_c(conn, s[0], s[1], s[2], s[3], 120)}
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
