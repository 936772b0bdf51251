"""Every message of a pipeline run delivered twice, in shuffled order, gives the memory of a
clean single run (turns, episodes, beliefs, entities, hygiene counts, idempotency keys and
what the mirrors hold; row ids and system time aside), whether a turn's follow-ups run
inline in its record_turn message or as messages of their own. Delivered twice in a row,
the second delivery writes nothing at all, not even an outbox row."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.helpers.post_turn import (
    REFUSED_TEXT,
    Driver,
    closing,
    make_context,
    outbox_rows,
    record_messages,
    replay_twice_shuffled,
    snapshot,
    turn,
)


def _turns() -> list[dict]:
    turns = [turn(i) for i in range(24)]  # four chat sessions, facts that change
    turns += [turn(i, tenant="t2", session="other") for i in range(6)]
    # In the last session: a turn of a new session would demote s3's working episodes, and
    # whether s3's duplicates were folded first would depend on the delivery order.
    turns.append({**turn(24, session="s3"), "text": REFUSED_TEXT})
    return turns


@pytest.mark.parametrize("inline", [(), None], ids=["messages", "inline"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_duplicated_shuffled_delivery_equals_a_clean_run(
        tmp_path: Path, seed: int, inline: tuple[str, ...] | None) -> None:
    clean_ctx = make_context(tmp_path / "clean", ("t1", "t2"))
    replay_ctx = make_context(tmp_path / "replay", ("t1", "t2"))
    with closing(clean_ctx, replay_ctx):
        clean = Driver(clean_ctx, inline=())  # the clean run: one message per step
        roots = record_messages(clean_ctx.settings, _turns())
        messages = clean.run_fifo(roots)
        jobs = {m.actor_name for m in messages}
        assert jobs >= {"record_turn", "extract_beliefs", "ego_anchor", "micro_consolidate"}

        replay = Driver(replay_ctx, inline=inline)
        # Inline, the follow-up messages are what a failed inline step or the
        # completeness check would send: delivered twice too, after their parent.
        deliveries = replay_twice_shuffled(replay, messages, random.Random(seed))
        assert deliveries == 2 * len(messages)
        # The replay's actors sent the same follow-ups (same ids) as the clean run's, or,
        # inline, none at all (they ran in their record_turn message).
        assert {m.message_id for m in replay.sent} == (set() if inline is None else {
            m.message_id for m in messages if m.actor_name != "record_turn"})

        expected = snapshot(clean_ctx.state.conn)
        got = snapshot(replay_ctx.state.conn)
        assert len(expected["turns"]) == 31 and len(expected["beliefs"]) > 10
        assert expected["hygiene_rejections"] == [("t1", "invalid_candidate", 1)]
        kinds = [k[0].split(":")[0] for k in expected["applied_jobs"]]
        believed = clean_ctx.state.conn.execute(
            "SELECT count(DISTINCT turn_uid) FROM beliefs").fetchone()[0]
        # Per turn: recorded, extracted, consolidated; anchored when it drew beliefs (its
        # own, or restatements of older ones: at least the turns that own beliefs).
        counted = {k: kinds.count(k) for k in set(kinds)}
        assert believed <= counted.pop("anchor") <= 31
        assert counted == {"record_turn": 31, "extract": 31, "consolidate": 31}
        assert len(expected["outbox"]) > 10
        for table in expected:
            assert got[table] == expected[table], table


def test_a_redelivery_right_after_the_first_writes_nothing(tmp_path: Path) -> None:
    clean_ctx = make_context(tmp_path / "clean", ("t1", "t2"))
    twice_ctx = make_context(tmp_path / "twice", ("t1", "t2"))
    with closing(clean_ctx, twice_ctx):
        messages = Driver(clean_ctx, inline=()).run_fifo(
            record_messages(clean_ctx.settings, _turns()))
        twice = Driver(twice_ctx, inline=())
        for message in messages:  # in the clean run's order, each one twice in a row
            twice.deliver(message)
            twice.deliver(message)
        expected = snapshot(clean_ctx.state.conn)
        got = snapshot(twice_ctx.state.conn)
        for table in expected:
            assert got[table] == expected[table], table
        # In the same order the changes are the same too: the outbox row for row.
        assert outbox_rows(twice_ctx.state.conn) == outbox_rows(clean_ctx.state.conn)
