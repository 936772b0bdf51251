"""Soak test: turns through real workers that are killed, on a Redis that is killed (a script).

Example:
    nice -n 10 .venv/bin/python bench/soak.py                      # 20,000 turns, ~10 min a broker
    .venv/bin/python bench/soak.py --turns 600 --duration 60 --brokers embedded

For each broker, in a temporary folder (deleted afterwards): two worker processes
(``mnemo worker --processes 1``, each in its own process group), and for Redis a
redis-server of the bench's own (its own port and ``--dir``, ``appendonly yes``). The bench
sends ``--turns`` LoCoMo turns spread over ``--tenants`` tenants through
``Memory.after_turn``, one message per turn, evenly over ``--duration`` seconds. Meanwhile a
worker is SIGKILLed every ``--kill-every`` seconds (the two in turn) and restarted, and on
Redis the server is SIGKILLed twice and restarted: at 30 % of the run with its append-only
file, at 65 % without its data; for ``--backlog`` seconds before that second crash the
workers are stopped (SIGSTOP, then SIGCONT), so the crash finds messages to lose rather than
the near-empty queue of a pool that keeps up.

Then it waits for the queue to drain (bounded: ``--drain-timeout``), runs the completeness
check (``soak_checks.completeness_check``), waits again, stops the workers and prints: turns
lost, follow-ups missing (turns recorded without their extraction), turns recorded twice in
effect, rows visible across tenants, and whether beliefs, entities and episodes equal a
single-process replay of the same turns (both reconsolidated first: before
``global_reconsolidation`` tiers and folded duplicates depend on arrival order). The last
line for each broker is ``RESULT <json>``. Exit status 1
when any count is not 0 or a table differs.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import soak_checks as checks  # noqa: E402
from embedders import DEFAULT_MODEL_PATH  # noqa: E402
from soak_env import (  # noqa: E402
    RedisServer,
    WorkerProcess,
    embedder_env,
    soak_turns,
    tenant_names,
    worker_env,
)

from memory_core import Memory  # noqa: E402
from memory_core.brokers import make_broker  # noqa: E402
from memory_core.db import migrate_stores, open_ops, open_state  # noqa: E402
from memory_core.jobs import QUEUES  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402

WORKERS = 2
REDIS_CRASHES = ((0.30, False), (0.65, True))  # (fraction of the run, lose the data)


class Chaos(threading.Thread):
    """Kills on a timetable: a worker every ``kill_every`` s; the Redis server twice."""

    def __init__(self, workers: list[WorkerProcess], server: RedisServer | None,
                 duration: float, kill_every: float, outage_s: float, backlog_s: float) -> None:
        super().__init__(name="soak-chaos", daemon=True)
        self.workers, self.server, self.outage_s = workers, server, outage_s
        self.backlog_s = backlog_s
        self.paused = False
        self.stop_event = threading.Event()
        self.events: list[str] = []
        plan: list[tuple[float, str, Any]] = []
        n = int(duration // kill_every) if kill_every > 0 else 0
        plan += [(kill_every * (i + 1), "worker", i % len(workers)) for i in range(n)]
        if server is not None:
            plan += [(duration * f, "redis", lose) for f, lose in REDIS_CRASHES]
            lossy = [duration * f for f, lose in REDIS_CRASHES if lose]
            plan += [(at - backlog_s, "pause", None) for at in lossy if backlog_s > 0]
        self.plan = sorted(p for p in plan if p[0] < duration)

    def run(self) -> None:
        began = time.monotonic()
        for at, what, arg in self.plan:
            if self.stop_event.wait(max(0.0, began + at - time.monotonic())):
                return
            if what == "worker":
                self.workers[arg].kill()
                self.stop_event.wait(0.5)
                self.workers[arg].start()
                self.events.append(f"{time.monotonic() - began:.0f}s kill worker{arg}")
            elif what == "pause":
                self._pause(True)
            else:
                self._crash_redis(began, lose_data=arg)

    def _pause(self, paused: bool) -> None:
        for w in self.workers:
            w.pause(paused)
        self.paused = paused

    def _crash_redis(self, began: float, lose_data: bool) -> None:
        assert self.server is not None
        held = self.server.held()
        self.server.crash(lose_data=lose_data)
        self.stop_event.wait(self.outage_s)
        self.server.start()
        if self.paused:
            self._pause(False)
        self.events.append(f"{time.monotonic() - began:.0f}s kill redis "
                           + (f"(data lost: {held} messages held)" if lose_data
                              else f"(AOF kept; {held} messages held)"))

    def finish(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)
        if self.paused:
            self._pause(False)


def send(settings: Any, turns: list[dict], duration: float) -> tuple[float, int]:
    """``after_turn`` for every turn, evenly over ``duration`` s; (seconds taken, errors)."""
    errors = 0
    began = time.monotonic()
    step = duration / max(1, len(turns))
    with Memory.open(settings) as mem:
        for i, turn in enumerate(turns):
            delay = began + i * step - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                mem.after_turn(turn)
            except Exception as e:  # a failed send is counted, never hidden
                errors += 1
                print(f"  after_turn failed: {type(e).__name__}", file=sys.stderr)
    return time.monotonic() - began, errors


def backlog(settings: Any) -> tuple[int, int]:
    """(messages waiting, in flight or delayed on every queue + spooled, dead letters)."""
    broker = make_broker(settings)
    try:
        stats = broker.queue_stats(QUEUES)
    finally:
        broker.close()
    ops = open_ops(settings, migrate=False)
    try:
        spooled = int(ops.conn.execute("SELECT count(*) FROM spool").fetchone()[0])
    finally:
        ops.close()
    return (sum(s.ready + s.delayed + s.in_flight for s in stats) + spooled,
            sum(s.dead for s in stats))


def settle(settings: Any, expected: int, timeout_s: float, quiet_s: float = 3) -> bool:
    """Wait until nothing is queued (for ``quiet_s`` in a row, or at once when every turn
    is recorded); False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        waiting, _ = backlog(settings)
        state = open_state(settings, migrate=False)
        try:
            recorded = int(state.conn.execute("SELECT count(*) FROM turns").fetchone()[0])
        finally:
            state.close()
        now = time.monotonic()
        if waiting:
            quiet_since = None
        else:
            quiet_since = quiet_since or now
            if recorded >= expected or now - quiet_since >= quiet_s:
                return True
        time.sleep(1)
    return False


def _prepare(root: Path, url: str | None, args: argparse.Namespace,
             tenants: list[str]) -> Any:
    settings = checks.settings_for(root / "data", url, args.lease, args.journal_resend,
                                   embedder_env(args.embedder, args.model_path))
    migrate_stores(settings)  # as `mnemo db migrate` before the chat host opens memory
    state = open_state(settings)
    try:
        for tenant in tenants:
            create_tenant(state.conn, tenant)
    finally:
        state.close()
    return settings


def _verdict(settings: Any, root: Path, turns: list[dict], tenants: list[str],
             args: argparse.Namespace) -> dict[str, Any]:
    out = checks.measure(settings, turns, tenants)
    began = time.monotonic()
    replayed = checks.settings_for(root / "replay", None, args.lease,
                                   embedder_env=embedder_env(args.embedder, args.model_path))
    migrate_stores(replayed)
    checks.replay(replayed, turns, tenants)
    checks.reconsolidate(settings)
    checks.reconsolidate(replayed)
    diffs = checks.differences(checks.snapshot(settings), checks.snapshot(replayed))
    out["replay_s"] = round(time.monotonic() - began, 1)
    out["differences"] = diffs
    return out


def run(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    tenants = tenant_names(args.tenants)
    turns = soak_turns(args.turns, tenants)
    with tempfile.TemporaryDirectory(prefix="mnemo-soak-") as tmp:
        root = Path(tmp)
        server = RedisServer(root / "redis") if kind == "redis" else None
        workers: list[WorkerProcess] = []
        try:
            if server is not None:
                server.start()
            url = server.url if server is not None else None
            settings = _prepare(root, url, args, tenants)
            env = worker_env(root / "data", url, args.lease, args.journal_resend,
                             embedder_env(args.embedder, args.model_path))
            workers = [WorkerProcess(env, args.threads, root / f"worker{i}.log")
                       for i in range(WORKERS)]
            for w in workers:
                w.start()
            chaos = Chaos(workers, server, args.duration, args.kill_every, args.redis_outage,
                          args.backlog)
            chaos.start()
            sent_s, send_errors = send(settings, turns, args.duration)
            chaos.finish()
            drained = settle(settings, len(turns), args.drain_timeout)
            check = checks.completeness_check(env)
            drained = settle(settings, len(turns), args.drain_timeout) and drained
            _, dead = backlog(settings)
            for w in workers:
                w.stop()
            out = _verdict(settings, root, turns, tenants, args)
            out.update({"broker": kind, "send_s": round(sent_s, 1), "send_errors": send_errors,
                        "drained": drained, "dead_letters": dead, "completeness_check": check,
                        "worker_kills": sum(w.kills for w in workers), "events": chaos.events})
            return out
        finally:
            for w in workers:
                w.stop()
            if server is not None:
                server.stop()


def passed(r: dict[str, Any]) -> bool:
    diffs = r["differences"]
    return (r["drained"] and r["send_errors"] == 0 and r["turns_lost"] == 0
            and r["followups_missing"] == 0 and r["unextracted"] == 0
            and r["recorded_twice"] == 0
            and r["cross_tenant_rows"] == 0 and not any(diffs.values()))


def _same(n: int) -> str:
    return "equal" if n == 0 else f"DIFFER ({n} rows)"


def report(r: dict[str, Any]) -> None:
    d = r["differences"]
    episodes = (f"episodes {_same(d['episodes'])} "
                f"(per turn: {_same(d['turn_episodes'])})")
    print(f"{r['broker']}: sent {r['turns_sent']:,} turns in {r['send_s']} s "
          f"({r['send_errors']} send errors), {r['worker_kills']} worker kills; "
          f"events: {', '.join(e for e in r['events'] if 'redis' in e) or 'none on redis'}")
    print(f"  completeness check: {r['completeness_check']}")
    print(f"  drained: {r['drained']}   dead letters: {r['dead_letters']}")
    print(f"  turns lost: {r['turns_lost']}   follow-ups missing: {r['followups_missing']}   "
          f"recorded twice: {r['recorded_twice']}   rows across tenants: "
          f"{r['cross_tenant_rows']}")
    print(f"  replay ({r['replay_s']} s): beliefs {_same(d['beliefs'])}, entities "
          f"{_same(d['entities'])}, {episodes}")
    print(f"  {'PASS' if passed(r) else 'FAIL'}")
    print("RESULT " + json.dumps(r, sort_keys=True))


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # so the finally blocks stop every process the bench started


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="embedded,redis")
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--tenants", type=int, default=5)
    parser.add_argument("--duration", type=float, default=600, help="seconds of sending")
    parser.add_argument("--kill-every", type=float, default=20, help="0: never")
    parser.add_argument("--threads", type=int, default=2, help="threads per worker process")
    parser.add_argument("--lease", type=int, default=15,
                        help="MNEMO_QUEUE_LEASE_SECONDS of the embedded queue")
    parser.add_argument("--journal-resend", type=int, default=60,
                        help="MNEMO_TURN_JOURNAL_RESEND_S (Redis: unrecorded turns re-sent "
                        "from the chat side's journal after this many seconds)")
    parser.add_argument("--redis-outage", type=float, default=2.0)
    parser.add_argument("--backlog", type=float, default=5,
                        help="Redis: seconds the workers are stopped (SIGSTOP) before the "
                        "crash that loses the data, so it loses a backlog (0: off)")
    parser.add_argument("--drain-timeout", type=float, default=300)
    parser.add_argument("--embedder", choices=("hash", "fastembed"), default="hash",
                        help="fastembed: the model in --model-path, one thread per process "
                        "(the workers embed ahead, as with any semantic model)")
    parser.add_argument("--model-path", default=str(DEFAULT_MODEL_PATH))
    args = parser.parse_args(argv)
    configure_logging(checks.settings_for(Path(tempfile.gettempdir()), None, args.lease),
                      force=True)
    print(f"{args.turns:,} LoCoMo turns, {args.tenants} tenants, {args.embedder}, "
          f"{WORKERS} worker processes "
          f"x {args.threads} threads, {args.duration:.0f} s, a worker killed every "
          f"{args.kill_every:.0f} s")
    ok = True
    for kind in args.brokers.split(","):
        result = run(kind.strip(), args)
        report(result)
        ok = passed(result) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
