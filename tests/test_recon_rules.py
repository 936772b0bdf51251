"""The pure rules of reconsolidation: the partition hash and the merge of a duplicate group."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memory_core.maintenance.partitions import bucket
from memory_core.maintenance.recon_episodes import (
    Fields,
    Member,
    TurnRef,
    group_key,
    plan_group,
)
from memory_core.model.episodes import episode_text, episode_uid
from tests.conftest import REPO

DAY = "2024-05-03"


def _turn(uid: str, at: str, session: str = "s1", text: str = "ok thanks") -> TurnRef:
    return TurnRef(uid, session, f"{DAY}T{at}:00.000000Z", "user", text)


def _member(i: int, tier: str, *turns: TurnRef, importance: float = 0.3, access: int = 0,
            last: str | None = None, expires: str | None = None,
            created: str = "2024-06-01T00:00:00.000000Z") -> Member:
    first = min(turns)
    return Member(i, "t1", Fields(episode_uid("t1", first.turn_uid), first.session_id, tier,
                                  episode_text("user", first.text, first.occurred_at),
                                  first.occurred_at, importance, access, last, created, expires),
                  turns)


def test_the_partition_hash_is_the_same_in_every_process() -> None:
    code = ("from memory_core.maintenance.partitions import bucket;"
            "print([bucket('subject', 't1', f'e{i}', 16) for i in range(50)])")
    outs = {subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                           text=True, env={"PYTHONHASHSEED": seed}, check=True).stdout
            for seed in ("1", "2")}
    assert outs == {f"{[bucket('subject', 't1', f'e{i}', 16) for i in range(50)]}\n"}
    spread = {bucket("subject", "t1", f"e{i}", 16) for i in range(200)}
    assert spread == set(range(16))  # every partition gets work


def test_duplicates_are_the_same_words_on_the_same_day_in_one_tenant() -> None:
    at = f"{DAY}T08:00:00.000000Z"
    assert group_key("t1", "[3 May 2024] user: OK,  Thanks", at) == \
        group_key("t1", "[3 may 2024] user: ok,  thanks", at.replace("08", "21"))
    assert group_key("t1", "x", at) != group_key("t2", "x", at)
    assert group_key("t1", "user: x", at) != group_key("t1", "user: x", "2024-05-04" + at[10:])


def test_the_merge_is_a_function_of_the_turns_not_of_the_rows() -> None:
    a, b, c = _turn("u1", "08:00"), _turn("u2", "09:00", "s2"), _turn("u3", "10:00", "s2")
    merged_early = [_member(5, "recent", a, c), _member(2, "recent", b)]
    merged_late = [_member(1, "recent", a), _member(7, "recent", b, c)]
    one, two = plan_group(merged_early, None), plan_group(merged_late, None)
    assert one.fields == two.fields
    assert one.fields.uid == episode_uid("t1", "u1") and one.fields.session_id == "s1"
    assert one.survivor.id == 5 and [m.id for m in one.losers] == [2]


def test_importance_access_and_expiry_merge_order_free() -> None:
    a, b = _turn("u1", "08:00"), _turn("u2", "09:00")
    plan = plan_group([
        _member(1, "recent", a, importance=0.4, access=2, last="2024-06-01", expires="2025"),
        _member(2, "recent", b, importance=0.7, access=3, last="2024-06-09", expires="2026",
                created="2024-05-31T00:00:00.000000Z"),
    ], None)
    f = plan.fields
    assert (f.importance, f.access_count, f.last_access_at, f.expires_at) == \
        (0.7, 5, "2024-06-09", "2026")
    assert f.created_at == "2024-05-31T00:00:00.000000Z"
    no_expiry = plan_group([_member(1, "recent", a, expires="2025"), _member(2, "recent", b)],
                           None)
    assert no_expiry.fields.expires_at is None  # kept for ever when any copy is


@pytest.mark.parametrize(("tiers", "current", "expected"), [
    (("working", "working"), ("s1", f"{DAY}T07:00:00.000000Z"), "working"),
    (("working", "recent"), ("s1", ""), "working"),
    (("recent", "recent"), ("s1", ""), "recent"),  # never promoted
    (("working", "working"), ("s1", f"{DAY}T08:30:00.000000Z"), "recent"),  # before the run
    (("working", "working"), ("s9", ""), "recent"),  # another session is current
    (("working", "long_term"), ("s9", ""), "long_term"),
    (("archive", "long_term"), ("s1", ""), "long_term"),
    (("working", "working"), None, "recent"),
])
def test_the_tier_of_a_group(tiers: tuple[str, str], current: tuple[str, str] | None,
                             expected: str) -> None:
    a, b = _turn("u1", "08:00"), _turn("u2", "09:00")
    plan = plan_group([_member(1, tiers[0], a), _member(2, tiers[1], b)], current)
    assert plan.fields.tier == expected


def test_an_older_text_format_is_kept() -> None:
    a, b = _turn("u1", "08:00"), _turn("u2", "09:00")
    old = _member(2, "recent", b)
    legacy = Member(1, "t1", Fields("ep_legacy", "s1", "recent", "user: ok thanks",
                                    a.occurred_at, 0.3, 0, None, "2024-06-01T00:00:00.000000Z",
                                    None), (a,))
    plan = plan_group([legacy, old], None)
    assert plan.survivor.id == 1 and plan.fields.text == "user: ok thanks"
    assert plan.fields.uid == episode_uid("t1", "u1")
    alone = plan_group([old], None)
    assert not alone.changed  # a single, canonical episode is left as it is
