"""Bad input is a clear error and stores nothing half-way (row counts before == after)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from memory_core.errors import InvalidInputError, UnknownPredicateError, UnknownTenantError
from memory_core.model.beliefs import BeliefInput, mutate_belief
from memory_core.model.turns import TurnInput, recollect_turn
from memory_core.write.pipeline import process_turns, record_turn_and_episode
from tests.helpers.memory import day, make_store, row_counts


@pytest.fixture
def store(tmp_path: Path):
    s = make_store(tmp_path / "data")
    yield s
    s.db.close()


GOOD = dict(tenant="t1", session_id="s1", turn_uid="u1", speaker="user", text="hi",
            occurred_at=day(0))

BAD_TURNS = [
    ("empty", {"text": ""}, "empty"),
    ("blank", {"text": "   \n\t"}, "empty"),
    ("huge", {"text": "a" * 1_000_000}, "more than the limit"),
    ("binary", {"text": b"\xff\xfe bytes"}, "not bytes"),
    ("nul", {"text": "ab\x00cd"}, "NUL"),
    ("invalid utf-8", {"text": b"caf\xe9".decode("utf-8", "surrogateescape")}, "Unicode"),
    ("not text", {"text": 42}, "must be text"),
    ("naive time", {"occurred_at": datetime(2024, 1, 1)}, "time zone"),
    ("malformed date", {"occurred_at": "2024-13-45 25:61"}, "ISO-8601"),
    ("date garbage", {"occurred_at": "yesterday-ish"}, "ISO-8601"),
    ("bad turn uid", {"turn_uid": "has space"}, "turn_uid"),
    ("bad session", {"session_id": ""}, "session_id"),
    ("bad tenant", {"tenant": "Bad Tenant!"}, "tenant"),
    ("negative index", {"index": -1}, "index"),
]


@pytest.mark.parametrize(("case", "change", "message"), BAD_TURNS, ids=[c[0] for c in BAD_TURNS])
def test_bad_turns_are_refused_and_nothing_is_stored(store, case, change, message) -> None:
    before = row_counts(store.conn)
    with pytest.raises(InvalidInputError, match=message):
        record_turn_and_episode(store.db, store.index, TurnInput(**{**GOOD, **change}))
    with pytest.raises(InvalidInputError, match=message):  # a batch with one bad turn
        process_turns(store.db, store.index,
                      [TurnInput(**GOOD), TurnInput(**{**GOOD, "turn_uid": "u2", **change})])
    assert row_counts(store.conn) == before


def test_unknown_tenant(store) -> None:
    before = row_counts(store.conn)
    with pytest.raises(UnknownTenantError, match="mnemo tenant add"):
        record_turn_and_episode(store.db, store.index, TurnInput(**{**GOOD, "tenant": "nobody"}))
    with pytest.raises(UnknownTenantError):
        mutate_belief(store.conn, store.index, "nobody", BeliefInput("I", "likes", "x", day(0)))
    with pytest.raises(UnknownTenantError):
        recollect_turn(store.conn, "nobody", "u1")
    assert row_counts(store.conn) == before


BAD_BELIEFS = [
    ("unknown predicate", {"predicate": "loves_deeply"}, UnknownPredicateError),
    ("unknown source", {"source": "gossip"}, InvalidInputError),
    ("confidence", {"confidence": 1.5}, InvalidInputError),
    ("malformed date", {"valid_from": "2024-02-30"}, InvalidInputError),
    ("naive date", {"valid_from": datetime(2024, 1, 1)}, InvalidInputError),
    ("end before start", {"valid_to": day(-1)}, InvalidInputError),
    ("empty object", {"object": " "}, InvalidInputError),
    ("nul subject", {"subject": "Al\x00ice"}, InvalidInputError),
    ("bytes object", {"object": b"Berlin"}, InvalidInputError),
    ("year out of range", {"valid_from": "0099-01-01T00:00:00Z"}, InvalidInputError),
]


@pytest.mark.parametrize(("case", "change", "error"), BAD_BELIEFS,
                         ids=[c[0] for c in BAD_BELIEFS])
def test_bad_beliefs_are_refused(store, case, change, error) -> None:
    before = row_counts(store.conn)
    fields = dict(subject="I", predicate="lives_in", object="Berlin", valid_from=day(0))
    with pytest.raises(error):
        mutate_belief(store.conn, store.index, "t1", BeliefInput(**{**fields, **change}))
    assert row_counts(store.conn) == before


def test_a_reused_turn_uid_with_other_words_is_refused(store) -> None:
    record_turn_and_episode(store.db, store.index, TurnInput(**GOOD))
    before = row_counts(store.conn)
    with pytest.raises(InvalidInputError, match="already recorded"):
        record_turn_and_episode(store.db, store.index, TurnInput(**{**GOOD, "text": "other"}))
    assert row_counts(store.conn) == before


def test_a_failure_mid_batch_rolls_everything_back(store, monkeypatch) -> None:
    from memory_core.write import pipeline

    before = row_counts(store.conn)
    calls = {"n": 0}
    real = pipeline._apply

    def boom(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk on fire")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_apply", boom)
    turns = [TurnInput(**{**GOOD, "turn_uid": f"u{i}"}) for i in range(3)]
    with pytest.raises(RuntimeError, match="disk on fire"):
        process_turns(store.db, store.index, turns, extractor=lambda t: [])
    assert row_counts(store.conn) == before
