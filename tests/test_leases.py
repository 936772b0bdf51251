"""Leases: claim, renew, contend, expire, release, forever, rollback, and a two-process race.

Every test uses a real ops database file under tmp_path and an injected ``now``.
"""

from __future__ import annotations

import math
import multiprocessing
import threading

import pytest

from memory_core.db.leases import FOREVER, Leases, SqliteLeases, claim, holder_of, release
from memory_core.db.sqlite import atomic
from memory_core.db.stores import Database
from memory_core.errors import InvalidInputError
from tests.helpers import lease_racer


def test_claim_renew_contend_and_takeover_at_expiry(ops_db: Database) -> None:
    conn = ops_db.conn
    assert holder_of(conn, "lead", now=100.0) is None
    assert claim(conn, "lead", "a", 10.0, now=100.0)  # free: taken
    assert holder_of(conn, "lead", now=100.0) == "a"
    assert not claim(conn, "lead", "b", 10.0, now=109.9)  # a's claim is current
    assert claim(conn, "lead", "a", 10.0, now=105.0)  # renewed: now runs to 115
    assert not claim(conn, "lead", "b", 10.0, now=112.0)  # would win without the renewal
    assert holder_of(conn, "lead", now=114.9) == "a"
    assert holder_of(conn, "lead", now=115.0) is None  # lapsed exactly at expires_at
    assert claim(conn, "lead", "b", 10.0, now=115.0)  # lapsed: taken over
    assert holder_of(conn, "lead", now=115.0) == "b"
    assert not claim(conn, "lead", "a", 10.0, now=116.0)  # a lost it
    assert claim(conn, "other", "a", 10.0, now=116.0)  # names are independent


def test_only_the_holder_releases(ops_db: Database) -> None:
    conn = ops_db.conn
    assert claim(conn, "lead", "a", 10.0, now=100.0)
    assert not release(conn, "lead", "b")
    assert holder_of(conn, "lead", now=101.0) == "a"
    assert release(conn, "lead", "a")
    assert holder_of(conn, "lead", now=101.0) is None
    assert not release(conn, "lead", "a")  # nothing left to give up
    assert claim(conn, "lead", "b", 10.0, now=101.0)  # free again before a's expiry


def test_a_forever_claim_is_never_taken_over(ops_db: Database) -> None:
    conn = ops_db.conn
    assert claim(conn, "window:backup:2025-01-01T00", "s1", None, now=100.0)
    # SQLite keeps IEEE infinity as a REAL, through a fresh connection too.
    fresh = ops_db.connect()
    try:
        row = fresh.execute("SELECT expires_at, typeof(expires_at) FROM leases").fetchone()
    finally:
        fresh.close()
    assert (row[0], row[1]) == (FOREVER, "real") and math.isinf(row[0])
    for now in (100.0, 1e12, 1e300):
        assert not claim(conn, "window:backup:2025-01-01T00", "s2", 10.0, now=now)
        assert not claim(conn, "window:backup:2025-01-01T00", "s2", None, now=now)
        assert holder_of(conn, "window:backup:2025-01-01T00", now=now) == "s1"
    assert not release(conn, "window:backup:2025-01-01T00", "s2")
    assert release(conn, "window:backup:2025-01-01T00", "s1")  # only its holder frees it


def test_a_claim_in_a_rolled_back_transaction_leaves_nothing(ops_db: Database) -> None:
    conn = ops_db.conn
    with pytest.raises(RuntimeError, match="caller failed"), atomic(conn):
        assert claim(conn, "window", "s1", None, now=100.0)
        assert holder_of(conn, "window", now=100.0) == "s1"  # visible inside
        raise RuntimeError("caller failed after claiming")
    assert holder_of(conn, "window", now=100.0) is None
    assert conn.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
    with atomic(conn):  # the same claim in a committed transaction stays
        assert claim(conn, "window", "s1", None, now=100.0)
        assert not claim(conn, "window", "s2", None, now=100.0)  # refused, outer goes on
    assert holder_of(conn, "window", now=200.0) == "s1"


def test_sqlite_leases_meets_the_interface_per_thread(ops_db: Database) -> None:
    leases: Leases = SqliteLeases(ops_db)
    assert leases.claim("relay", "a", 30.0, now=100.0)
    seen: list[object] = []

    def other_thread() -> None:  # its own connection from the Database
        seen.append(leases.claim("relay", "b", 30.0, now=110.0))
        seen.append(leases.holder_of("relay", now=110.0))
        seen.append(ops_db.conn is not main_conn)

    main_conn = ops_db.conn
    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen == [False, "a", True]
    assert leases.release("relay", "a")
    assert leases.holder_of("relay", now=110.0) is None


@pytest.mark.parametrize("ttl_s", [0.0, -1.0, math.nan])
def test_a_bad_ttl_is_refused(ops_db: Database, ttl_s: float) -> None:
    with pytest.raises(InvalidInputError, match="ttl_s must be a positive number"):
        claim(ops_db.conn, "lead", "a", ttl_s, now=100.0)
    assert holder_of(ops_db.conn, "lead", now=100.0) is None


def test_an_infinite_now_cannot_reach_a_forever_claim(ops_db: Database) -> None:
    assert claim(ops_db.conn, "window", "s1", None, now=100.0)
    with pytest.raises(InvalidInputError, match="now must be finite"):
        claim(ops_db.conn, "window", "s2", 10.0, now=math.inf)
    assert holder_of(ops_db.conn, "window", now=1e300) == "s1"


def test_two_processes_racing_never_both_win(ops_db: Database) -> None:
    rounds = 150
    ctx = multiprocessing.get_context("spawn")  # no SQLite connection crosses a fork
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    racers = [ctx.Process(target=lease_racer.race,
                          args=(str(ops_db.path), holder, rounds, barrier, results))
              for holder in ("p1", "p2")]
    for p in racers:
        p.start()
    wins = dict(results.get(timeout=120) for _ in racers)
    for p in racers:
        p.join(timeout=30)
        assert p.exitcode == 0, f"racer {p.name} exited with {p.exitcode}"
    assert len(wins["p1"]) == len(wins["p2"]) == rounds
    both = [r for r in range(rounds) if wins["p1"][r] and wins["p2"][r]]
    neither = [r for r in range(rounds) if not (wins["p1"][r] or wins["p2"][r])]
    assert (both, neither) == ([], []), f"p1 won {sum(wins['p1'])}, p2 won {sum(wins['p2'])}"
    last_winner = "p1" if wins["p1"][-1] else "p2"
    assert holder_of(ops_db.conn, lease_racer.RACE_NAME,
                     now=(rounds - 1) * lease_racer.ROUND_S) == last_winner
