"""The writers' queue across processes (``memory_core/db/writer_lock.py``), with real
processes holding real ``flock`` locks on real database files."""

from __future__ import annotations

import fcntl
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memory_core.db import sqlite as sqlite_mod
from memory_core.db import writer_lock as writer_lock_mod
from memory_core.db.sqlite import atomic, connect

LOCK_SUFFIX = writer_lock_mod.SUFFIX


def _db(path: Path, busy_timeout_ms: int = 5000) -> sqlite_mod.Connection:
    conn = connect(path, busy_timeout_ms=busy_timeout_ms)
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, who TEXT)")
    return conn


def _lock_is_free(db: Path) -> bool:
    """Asked from another process: can it take the queue's lock right now?"""
    probe = textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(db) + LOCK_SUFFIX!r}, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(3)
        sys.exit(0)
    """)
    code = subprocess.run([sys.executable, "-c", probe], timeout=30).returncode
    assert code in (0, 3), code
    return code == 0


def _holder(db: Path, hold_s: float) -> subprocess.Popen[bytes]:
    """Another process that takes the lock, says so on stdout, and holds it ``hold_s``; then
    prints its ``time.monotonic()`` (one clock for every process) and lets it go."""
    script = textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(db) + LOCK_SUFFIX!r}, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep({hold_s})
        print(repr(time.monotonic()), flush=True)
        fcntl.flock(fd, fcntl.LOCK_UN)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
    return proc


def test_a_write_transaction_holds_the_queue_for_every_process(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = _db(db)
    with atomic(conn):
        conn.execute("INSERT INTO t (who) VALUES ('a')")
        assert not _lock_is_free(db)
    assert _lock_is_free(db)
    conn.close()


def test_a_writer_waits_its_turn_behind_another_process(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = _db(db)
    holder = _holder(db, hold_s=1.0)
    with atomic(conn):
        got = time.monotonic()
        conn.execute("INSERT INTO t (who) VALUES ('b')")
    out, _ = holder.communicate(timeout=30)
    assert holder.returncode == 0
    released = float(out)
    # It queued behind the holder instead of writing beside it: it got the lock only once
    # the holder let it go (a cause and its effect, whatever the machine's load).
    assert released <= got, (released, got)
    assert conn.execute("SELECT who FROM t").fetchall() == [("b",)]
    conn.close()


def test_a_stuck_holder_costs_a_writer_the_busy_timeout_not_forever(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = _db(db, busy_timeout_ms=300)
    holder = _holder(db, hold_s=60)
    try:
        started = time.monotonic()
        with capture_logs() as logs, atomic(conn):
            conn.execute("INSERT INTO t (who) VALUES ('c')")
        took = time.monotonic() - started
        # SQLite's own lock was free: after the queue's timeout the write went on without it.
        assert 0.25 <= took < 5
        assert [e["event"] for e in logs] == ["sqlite_writer_queue_timeout"]
    finally:
        holder.kill()
        holder.wait(timeout=30)
    # The abandoned wait took the lock once the holder died, and let it go at once: the
    # waiter thread has answered it when nothing is pending (until then a probe may find the
    # lock free, and the waiter's blocking flock be granted an instant later).
    lock = conn.writer_queue
    deadline = time.monotonic() + 10
    while lock._pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lock._pending == 0
    assert _lock_is_free(db)
    with atomic(conn):
        conn.execute("INSERT INTO t (who) VALUES ('d')")
    assert _lock_is_free(db)  # and the next writer took and released it as usual
    assert [r[0] for r in conn.execute("SELECT who FROM t ORDER BY id")] == ["c", "d"]
    conn.close()


def test_a_process_killed_inside_its_transaction_frees_the_queue(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _db(db).close()
    script = textwrap.dedent(f"""
        import os, signal
        from memory_core.db.sqlite import atomic, connect
        conn = connect({str(db)!r})
        with atomic(conn):
            conn.execute("INSERT INTO t (who) VALUES ('lost')")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    child = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[1],
                           timeout=60)
    assert child.returncode == -9
    assert _lock_is_free(db)
    conn = _db(db)
    with capture_logs() as logs, atomic(conn):
        conn.execute("INSERT INTO t (who) VALUES ('e')")
    assert logs == []  # no wait for the dead process's lock (sqlite_writer_queue_timeout)
    assert [r[0] for r in conn.execute("SELECT who FROM t")] == ["e"]  # nothing half-written
    conn.close()


def test_threads_of_one_process_and_another_process_all_write_in_turn(tmp_path: Path) -> None:
    """Many writers of two processes, each counting in a read-modify-write transaction:
    every increment lands (SQLite's lock guards the data; the queue only orders)."""
    db = tmp_path / "s.db"
    conn = _db(db)
    conn.execute("CREATE TABLE n (k INTEGER PRIMARY KEY, v INTEGER)")
    conn.execute("INSERT INTO n VALUES (1, 0)")
    script = textwrap.dedent(f"""
        import threading
        from memory_core.db.sqlite import atomic, connect
        conns = [connect({str(db)!r}) for _ in range(4)]
        def work(c):
            for _ in range(50):
                with atomic(c):
                    v = c.execute("SELECT v FROM n WHERE k = 1").fetchone()[0]
                    c.execute("UPDATE n SET v = ? WHERE k = 1", (v + 1,))
        ts = [threading.Thread(target=work, args=(c,)) for c in conns]
        [t.start() for t in ts]
        [t.join() for t in ts]
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parents[1])
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert conn.execute("SELECT v FROM n").fetchone()[0] == 2 * 4 * 50
    assert _lock_is_free(db)
    conn.close()


def test_no_lock_file_means_no_queue_and_the_write_still_lands(tmp_path: Path,
                                                               monkeypatch) -> None:
    db = tmp_path / "s.db"
    real_open = os.open

    def refuse(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith(LOCK_SUFFIX):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(writer_lock_mod.os, "open", refuse)
    monkeypatch.setattr(writer_lock_mod, "_locks", {})
    conn = _db(db)
    with capture_logs() as logs:
        for who in ("f", "g"):
            with atomic(conn):
                conn.execute("INSERT INTO t (who) VALUES (?)", (who,))
    assert [e["event"] for e in logs] == ["sqlite_writer_queue_off"]  # said once, not per write
    assert logs[0]["error"] == "PermissionError"
    assert [r[0] for r in conn.execute("SELECT who FROM t ORDER BY id")] == ["f", "g"]
    conn.close()


def test_a_forked_child_gets_its_own_queue(tmp_path: Path) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    db = tmp_path / "s.db"
    parent = writer_lock_mod.writer_lock(db)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a queue of its own, so it excludes its parent's
        os.close(read)
        child = writer_lock_mod.writer_lock(db)
        ok = child is not parent and child.acquire(5.0)
        os.write(write, b"1" if ok else b"0")
        time.sleep(0.5)
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    assert not parent.acquire(0.1)  # the child holds it: the parent waits, then goes on
    os.waitpid(pid, 0)
    assert parent.acquire(5.0)
    parent.release()
    # The abandoned wait's blocking flock may be granted only now (the first non-blocking
    # try above can win the race with it); the waiter thread then lets it go at once.
    deadline = time.monotonic() + 5.0
    while parent._pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert parent._pending == 0
    fd = os.open(str(db) + LOCK_SUFFIX, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    os.close(fd)
    writer_lock_mod.forget(parent)


def test_a_child_forked_during_a_write_waits_for_that_write_only(tmp_path: Path) -> None:
    """A thread of the parent holds the queues (inside a write) when the process forks. In
    the child that thread does not exist, so an in-process lock it held would never be let
    go there: the child's queues are its own, and it waits only for the parent's ``flock``
    to be let go, not for its busy timeout. (SQLite itself is left out: a child must not use
    a database file its parent has open, which is why each worker is a spawned process.)"""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    db = tmp_path / "s.db"
    parent = writer_lock_mod.writer_lock(db)
    inside, leave = threading.Event(), threading.Event()

    def parent_write() -> None:
        with parent.held(5.0):
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=parent_write)
    thread.start()
    assert inside.wait(5)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            with writer_lock_mod.writer_lock(db).held(5.0):
                got = time.monotonic()  # one clock for both processes (CLOCK_MONOTONIC)
            os.write(write, f"{got:.6f}".encode())
        finally:
            os._exit(0)
    os.close(write)
    time.sleep(1.0)
    released = time.monotonic()  # the parent's write ends from here on
    leave.set()
    thread.join(10)
    got = float(os.read(read, 32) or b"nan")
    os.waitpid(pid, 0)
    # The child got the lock once the parent's write let it go (not before: it waited for
    # it), and soon after, not when its own 5 s wait for a lock nobody would let go ran out.
    assert released <= got < released + 3.0, (released, got)
    writer_lock_mod.forget(parent)


def _open_descriptors() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}


def test_closing_the_last_connection_lets_the_lock_file_go(tmp_path: Path) -> None:
    """A process that opens and closes many stores (the CLI in one test process, a restore)
    keeps no lock file open: an open file would also stop a read-only remount."""
    paths = [tmp_path / f"s{i}.db" for i in range(40)]
    for path in paths:
        first, second = _db(path), _db(path)
        with atomic(first):
            first.execute("INSERT INTO t (who) VALUES ('h')")
        first.close()
        with atomic(second):  # the other connection still queues
            second.execute("INSERT INTO t (who) VALUES ('i')")
            if path == paths[0]:
                assert not _lock_is_free(path)
        second.close()
    held = {p for p in _open_descriptors() if p.endswith(LOCK_SUFFIX)
            and p.startswith(str(tmp_path))}
    assert held == set()
    assert not [k for k in writer_lock_mod._locks if k[0].startswith(str(tmp_path))]
    dropped = _db(tmp_path / "dropped.db")  # never closed: let go when collected
    del dropped
    gc.collect()
    assert not {p for p in _open_descriptors() if p.endswith(LOCK_SUFFIX)
                and p.startswith(str(tmp_path))}
