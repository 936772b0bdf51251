"""The recall log's background writer: ids given at once, rows written in order and trimmed,
nothing raised into recall, bounded backlog."""

from __future__ import annotations

import threading

from memory_core.recall import log_writer
from memory_core.recall.log_writer import RecallLogWriter


def _rows(ops_db, tenant: str) -> list[tuple[int, str]]:
    return ops_db.conn.execute("SELECT id, query_digest FROM recall_log WHERE tenant = ? "
                               "ORDER BY id", (tenant,)).fetchall()


def test_rows_are_written_in_the_background_in_order_and_trimmed(ops_db) -> None:
    writer = RecallLogWriter(ops_db, keep=3)
    ids = [writer.submit("acme", f"d{i}", "default", '{"candidates":[]}') for i in range(5)]
    assert all(i is not None for i in ids) and ids == sorted(set(ids))
    writer.flush()
    assert _rows(ops_db, "acme") == [(ids[2], "d2"), (ids[3], "d3"), (ids[4], "d4")]
    writer.close()
    assert writer.submit("acme", "late", "default", "{}") is None  # closed: dropped


def test_a_taken_id_is_skipped_and_the_writer_goes_on(ops_db) -> None:
    writer = RecallLogWriter(ops_db, keep=10)
    first = writer.submit("acme", "one", "default", "{}")
    writer.flush()
    writer.next_id = lambda: first  # another process took the same id
    assert writer.submit("acme", "two", "default", "{}") == first
    writer.flush()
    del writer.next_id
    third = writer.submit("acme", "three", "default", "{}")
    writer.close()  # close flushes
    assert _rows(ops_db, "acme") == [(first, "one"), (third, "three")]


def test_a_stuck_database_drops_rows_instead_of_making_recall_wait(ops_db, monkeypatch) -> None:
    writer = RecallLogWriter(ops_db, keep=10, max_pending=2)
    release = threading.Event()
    real = log_writer.write_recall_log

    def stuck(*args, **kwargs):  # the first write waits until released
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(log_writer, "write_recall_log", stuck)
    got = [writer.submit("acme", f"d{i}", "default", "{}") for i in range(6)]
    # At most one row in the writer's hands and two waiting: the rest are dropped at once.
    assert got[0] is not None and got.count(None) >= 3
    release.set()
    writer.close()
    assert [r[0] for r in _rows(ops_db, "acme")] == [g for g in got if g is not None]
