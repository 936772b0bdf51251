"""Backup, restore and restore-drill time and size for a 100k-turn memory (a script).

Example:
    nice -n 10 .venv/bin/python bench/backup.py
    .venv/bin/python bench/backup.py --turns 10000 --keep /tmp/mnemo-bench-backup

The memory is built through the real write path, no shortcut: the generated chat turns of
``bench/write_path.py`` (3 tenants, facts that change over time) go through
``pipeline.process_turns`` in batches of 64 (raw turn, episode, heuristic extraction,
beliefs with their rules, entities, ego anchors, FTS, hash-embedder vectors, outbox), and
one audit row per turn goes to memory_ops.db as the workers' Audit middleware would write
it. Then, in a fresh process (so its peak RSS is the backup's own), it times the ``backup``
job (online copies of both databases, exports per tenant, sha256 of every file), a
``restore`` into an empty folder and a ``restore_drill``, and prints sizes and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.write_path import generate  # noqa: E402
from memory_core.clock import utcnow  # noqa: E402
from memory_core.db import open_ops, open_state  # noqa: E402
from memory_core.embedders import HashEmbedder  # noqa: E402
from memory_core.maintenance.backup import backup  # noqa: E402
from memory_core.maintenance.backup_files import list_backups  # noqa: E402
from memory_core.maintenance.base import JobEnv  # noqa: E402
from memory_core.maintenance.drill import restore_drill  # noqa: E402
from memory_core.maintenance.restore import restore  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402
from memory_core.write.pipeline import process_turns  # noqa: E402
from workers.audit import AuditEntry, write_audit  # noqa: E402

DIM = 384


def build(data_dir: Path, n: int, batch: int, tenants: int) -> float:
    settings = Settings.from_env({}, data_dir=data_dir)
    state, ops = open_state(settings), open_ops(settings)
    names = [f"bench{i}" for i in range(tenants)]
    for tenant in names:
        create_tenant(state.conn, tenant)
    index = VectorIndex(HashEmbedder(dim=DIM))
    turns = generate(n, names)
    began = time.perf_counter()
    for start in range(0, n, batch):
        chunk = turns[start:start + batch]
        process_turns(state, index, chunk)
        write_audit(ops.conn, f"bench-{start}", [
            AuditEntry(t.tenant, "turn_recorded", "turn", t.turn_uid) for t in chunk])
    elapsed = time.perf_counter() - began
    for db in (state, ops):
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
    return elapsed


def peak_rss_mb() -> float:
    """This process's peak resident set. Linux's ``ru_maxrss`` survives ``exec``: a child
    started by a big parent reports the parent's size, so read ``VmHWM`` of the new image."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(data_dir: Path) -> dict[str, object]:
    """Backup, restore and drill over ``data_dir``; run in a fresh process."""
    settings = Settings.from_env({}, data_dir=data_dir)
    state, ops = open_state(settings), open_ops(settings)
    env = JobEnv(settings, state, ops, VectorIndex(HashEmbedder(dim=DIM)), utcnow(),
                 f"manual:{uuid.uuid4()}")
    began = time.perf_counter()
    report = backup(env)
    backup_s = time.perf_counter() - began
    info = list_backups(settings.backups_path)[-1]
    began = time.perf_counter()
    restore(info, data_dir.parent / "restored")
    restore_s = time.perf_counter() - began
    began = time.perf_counter()
    drill = restore_drill(env)
    drill_s = time.perf_counter() - began
    state.close()
    ops.close()
    rows = info.manifest["databases"]["state"]["tables"]
    return {
        "backup_s": round(backup_s, 2), "restore_s": round(restore_s, 2),
        "drill_s": round(drill_s, 2), "drill_ok": drill.counts["ok"],
        "live_bytes": sum((data_dir / n).stat().st_size
                          for n in ("memory_state.db", "memory_ops.db")),
        "backup_bytes": _size(info.path),
        "db_bytes": sum(info.manifest["files"][f]["bytes"]
                        for f in ("memory_state.db", "memory_ops.db")),
        "export_bytes": _size(info.path / "exports"),
        "rows": {t: rows[t] for t in ("turns", "episodes", "beliefs", "entities")},
        "audit_rows": info.manifest["databases"]["ops"]["tables"]["audit_log"],
        "exported": {k: report.counts[k] for k in ("beliefs", "episodes", "audit_log")},
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Build in this folder and keep it.")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        data_dir = root / "data"
        build_s = build(data_dir, args.turns, args.batch, args.tenants)
        print(f"built {args.turns:,} turns ({args.tenants} tenants) through the write path "
              f"in {build_s:.1f} s")
        out = subprocess.run([sys.executable, __file__, "--measure", str(data_dir)],
                             capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
    mb = 1e6
    print(f"rows: {figures['rows']}  audit rows: {figures['audit_rows']:,}")
    print(f"live databases: {figures['live_bytes'] / mb:.1f} MB")
    print(f"backup: {figures['backup_s']:.2f} s, {figures['backup_bytes'] / mb:.1f} MB "
          f"(databases {figures['db_bytes'] / mb:.1f} MB, exports "
          f"{figures['export_bytes'] / mb:.1f} MB), exported {figures['exported']}")
    print(f"restore: {figures['restore_s']:.2f} s   drill: {figures['drill_s']:.2f} s "
          f"(ok={figures['drill_ok']})   peak RSS of backup+restore+drill: "
          f"{figures['peak_rss_mb']} MB")


if __name__ == "__main__":
    main()
