"""What the recall benches share around their runs: where the store lives, the JSON report
and the per-group means of per-question rows."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def run_and_report(args: argparse.Namespace, prefix: str,
                   run: Callable[[argparse.Namespace, Path], dict[str, Any]],
                   show: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """``run(args, data_dir)`` in ``args.data_dir`` (kept) or a temporary folder, the report
    written to ``args.json_out`` when given, then ``show``n; the report."""
    if args.data_dir:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        report = run(args, args.data_dir)
    else:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            report = run(args, Path(tmp))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    show(report)
    return report


def mean_table(groups: Mapping[str, Sequence[Mapping[str, float]]]
               ) -> dict[str, dict[str, float]]:
    """Per group, the mean of each metric over its rows and ``n``; empty groups left out."""
    out: dict[str, dict[str, float]] = {}
    for name, rows in groups.items():
        if rows:
            out[name] = {m: sum(r[m] for r in rows) / len(rows) for m in rows[0]}
            out[name]["n"] = len(rows)
    return out
