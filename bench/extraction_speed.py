"""What the rule-based extractor costs: import, first use, and per turn (a script, not a test).

Example:
    nice -n 10 .venv/bin/python bench/extraction_speed.py --baseline main

Measures this checkout and, with ``--baseline REF``, the same code paths of git ref ``REF``
(its ``memory_core`` exported to a temporary folder), side by side in one run, each in fresh
interpreters:

- import: the self time of the ``memory_core.extraction.*`` modules under
  ``python -X importtime -c 'import memory_core.extraction.heuristic'`` (wall), and the CPU
  time of that import once ``memory_core`` is loaded (what a worker or CLI pays beyond
  ``memory_core`` itself), medians of ``--runs`` interpreters;
- first turn: the CPU time of the first ``extract_heuristic`` call of a fresh interpreter
  (lazy compiles land here), median of ``--runs`` interpreters;
- per turn: the median per-turn CPU time over every turn of the LoCoMo conversations (real
  chat text), ``--rounds`` rounds after a warm-up, interleaved between the two checkouts.

CPU time (``time.process_time``), not wall time: the machine is shared, and waiting for a
core is not the extractor's cost. The import figure is ``-X importtime``'s (wall).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"

_PER_TURN = r"""
import json, statistics, sys, time
from datetime import UTC, datetime
from memory_core.extraction.heuristic import TurnText, extract_heuristic
data = json.load(open(sys.argv[1], encoding="utf-8"))
at = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
turns = [TurnText(str(t.get("text", "")), t.get("speaker", "user"), at)
         for conv in data for key, sess in sorted(conv["conversation"].items())
         if key.startswith("session_") and not key.endswith("date_time") and isinstance(sess, list)
         for t in sess]
t0 = time.process_time(); extract_heuristic(turns[0]); first = time.process_time() - t0
for t in turns: extract_heuristic(t)  # warm-up
rounds = []
for _ in range(int(sys.argv[2])):
    t0 = time.process_time()
    n = sum(len(extract_heuristic(t)) for t in turns)
    rounds.append((time.process_time() - t0) / len(turns))
print(json.dumps({"first_ms": first * 1000, "per_turn_us": statistics.median(rounds) * 1e6,
                  "turns": len(turns), "candidates": n}))
"""


def _env(src: Path) -> dict[str, str]:
    """Bytecode caching on (as in a deployed worker): the import figure is not compiling."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(src)}


def import_ms(src: Path) -> float:
    """Self time (ms) of the extraction modules when importing the heuristic extractor."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c",
                          "import memory_core.extraction.heuristic"], env=_env(src),
                         cwd=src, capture_output=True, text=True, check=True).stderr
    total = 0
    for line in out.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2].startswith("memory_core.extraction"):
            total += int(parts[0])
    return total / 1000


_IMPORT_CPU = (
    "import time, memory_core\n"
    "t0 = time.process_time()\n"
    "import memory_core.extraction.heuristic\n"
    "print((time.process_time() - t0) * 1000)"
)


def import_cpu_ms(src: Path) -> float:
    """CPU ms of importing the heuristic extractor once ``memory_core`` is loaded."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_CPU], env=_env(src), cwd=src,
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip())


def per_turn(src: Path, data: Path, rounds: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _PER_TURN, str(data), str(rounds)],
                         env=_env(src), cwd=src, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def export(ref: str, into: Path) -> Path:
    """``memory_core`` of git ref ``ref`` in ``into`` (read with ``git archive``)."""
    archive = into / "src.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(REPO_ROOT), "archive", ref, "memory_core"], stdout=fh,
                       check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", default=None, help="git ref to compare with, e.g. main")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--runs", type=int, default=5, help="fresh interpreters per figure")
    p.add_argument("--rounds", type=int, default=3, help="passes over the turns per run")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mnemo-xspeed-") as tmp:
        sources = {"this": REPO_ROOT}
        if args.baseline:
            sources[args.baseline] = export(args.baseline, Path(tmp))
        imports: dict[str, list[float]] = {k: [] for k in sources}
        import_cpu: dict[str, list[float]] = {k: [] for k in sources}
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in sources}
        for src in sources.values():  # writes the bytecode caches
            import_cpu_ms(src)
        for _ in range(args.runs):  # interleaved, so machine load hits both alike
            for name, src in sources.items():
                imports[name].append(import_ms(src))
                import_cpu[name].append(import_cpu_ms(src))
                runs[name].append(per_turn(src, args.data, args.rounds))
    turns = int(runs["this"][0]["turns"])
    print(f"{turns} LoCoMo turns, {args.runs} fresh interpreters each, {args.rounds} rounds per "
          "interpreter (medians)")
    print("| code | import ms (wall) | import CPU ms | first turn CPU ms | per turn CPU us | "
          "candidates |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in sources:
        print(f"| {name} | {statistics.median(imports[name]):.1f} | "
              f"{statistics.median(import_cpu[name]):.1f} | "
              f"{statistics.median(r['first_ms'] for r in runs[name]):.1f} | "
              f"{statistics.median(r['per_turn_us'] for r in runs[name]):.1f} | "
              f"{int(runs[name][0]['candidates'])} |")
    if args.baseline:
        b = args.baseline
        ratio = (statistics.median(r["per_turn_us"] for r in runs["this"])
                 / statistics.median(r["per_turn_us"] for r in runs[b]))
        print(f"per-turn ratio this/{b} = {ratio:.2f}")


if __name__ == "__main__":
    main()
