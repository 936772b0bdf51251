"""Instructions per ``after_turn`` call, journal on and off (a script, not a test).

Example:
    .venv/bin/python bench/enqueue_instructions.py            # 100 and 600 calls per mode

Runs ``bench/enqueue.py`` (Redis, one mode at a time) under ``valgrind --tool=callgrind``
twice per mode, with ``--small`` and ``--large`` timed calls, and prints
``(instructions(large) - instructions(small)) / (large - small)``: what one more call costs
the chat process in instructions, whatever the machine's load (the start-up, imports and
warm-up cancel out). Counts the chat process only, not redis-server. Slow (valgrind runs
Python some 50 times slower): keep the call counts small.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "enqueue.py"


def instructions(mode: str, calls: int, redis_url: str) -> int:
    """Total instructions (all threads) of one bench run under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             sys.executable, str(BENCH), "--brokers", "redis", "--journal", mode,
             "--calls", str(calls), "--redis-url", redis_url],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"valgrind failed ({done.returncode}): {done.stderr[-2000:]}")
        found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
        if found is None:
            raise SystemExit(f"no instruction count in valgrind's output: {done.stderr[-2000:]}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=600)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    per_call = {}
    for mode in ("on", "off"):
        small = instructions(mode, args.small, args.redis_url)
        large = instructions(mode, args.large, args.redis_url)
        per_call[mode] = (large - small) / (args.large - args.small)
        print(f"journal {mode:3s}: {per_call[mode]:,.0f} instructions per after_turn "
              f"({small:,} at {args.small} calls, {large:,} at {args.large})", flush=True)
    print(f"the journal: {per_call['on'] - per_call['off']:+,.0f} instructions per call "
          f"({(per_call['on'] / per_call['off'] - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
