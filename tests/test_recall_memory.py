"""Memory.recall on real SQLite files: lists, handles, pointers, as_of, tenants, degradation,
the explanation log."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core import Budget, Memory
from memory_core.embedders import HashEmbedder
from memory_core.errors import UnknownTenantError
from memory_core.recall import RecallStrategy
from memory_core.recall.search import TermPlan, TermStats, plan_terms
from memory_core.settings import Settings

pytest_plugins = ("tests.helpers.recall_fixtures",)


def test_recall_finds_facts_then_evidence_with_handles_and_pointers(seeded, mem) -> None:
    seeder, _ = seeded
    seeder.entity("acme", "ana", "Ana")
    uid = seeder.turn("acme", "Ana moved to Lisbon last spring and loves the trams")
    seeder.turn("acme", "We talked about sourdough bread recipes")
    seeder.belief("acme", "ana", "lives_in", "Lisbon", turn_uid=uid, subject_name="Ana")
    result = mem.recall("Where does Ana live now?", tenant="acme")
    assert result.items and result.facts, result
    handles = [e.handle for e in result.entries()]
    assert handles == list(range(1, len(handles) + 1))
    fact = result.facts[0]
    assert (fact.subject, fact.predicate, fact.object) == ("Ana", "lives_in", "Lisbon")
    assert fact.text == "Ana lives in Lisbon" and fact.turn_uids == (uid,)
    assert fact.components["subject"] == 1.0 and fact.components["predicate"] == 1.0
    assert {i.kind for i in result.items} == {"episode"}  # evidence: never beliefs
    top = result.items[0]
    assert uid in top.turn_uids and "rrf" in top.components
    assert not result.keyword_only
    data = result.to_dict()
    assert data["facts"][0]["label"] == "[1]" and data["items"][0]["label"] == "[2]"
    assert mem.recall("Where does Ana live now?", tenant="acme", fact_budget=0).facts == ()


def test_budget_truncates_items_and_tokens(seeded, mem) -> None:
    seeder, _ = seeded
    for i in range(12):
        seeder.turn("acme", f"garden note {i}: tomatoes and basil " + "x" * (40 * i))
    assert len(mem.recall("garden tomatoes", tenant="acme", budget=3)) == 3
    small = mem.recall("garden tomatoes", tenant="acme", budget=Budget(items=50, tokens=60))
    assert 1 <= len(small) < 12
    assert sum(len(i.text) for i in small.items) / 4 <= 60


def test_as_of_returns_what_was_valid_across_a_supersession(seeded, mem) -> None:
    seeder, _ = seeded
    seeder.entity("acme", "ana", "Ana")
    moved = datetime(2024, 6, 1, tzinfo=UTC)
    seeder.belief("acme", "ana", "lives_in", "Berlin", subject_name="Ana",
                  valid_from=datetime(2023, 1, 1, tzinfo=UTC), valid_to=moved,
                  status="superseded")
    seeder.belief("acme", "ana", "lives_in", "Lisbon", subject_name="Ana", valid_from=moved)
    def texts(**kw) -> list[str]:
        return [f.text for f in mem.recall("Ana lives in", tenant="acme", **kw).facts]
    assert texts() == ["Ana lives in Lisbon"]
    assert texts(as_of=datetime(2024, 3, 1, tzinfo=UTC)) == ["Ana lives in Berlin"]
    assert texts(as_of="2024-07-01T00:00:00Z") == ["Ana lives in Lisbon"]
    assert texts(as_of="2022-01-01T00:00:00Z") == []


def test_invalidated_and_pending_beliefs_and_archived_episodes_are_not_recalled(seeded,
                                                                                 mem) -> None:
    seeder, _ = seeded
    seeder.belief("acme", "user", "likes", "zucchini soup", status="invalidated")
    seeder.belief("acme", "user", "likes", "zucchini bread", status="pending_review")
    seeder.turn("acme", "zucchini harvest notes", tier="archive")
    # The query names every object (a fact's object counts as named when the query says
    # most of its words), so only status and tier keep rows out.
    query = "zucchini soup, bread, pie or cake"
    nothing = mem.recall(query, tenant="acme")
    assert len(nothing) == 0 and nothing.facts == ()
    # Positive control: the same rows with a recalled status or tier are found by the same
    # query while the others stay out, and the archive is found when asked for.
    seeder.belief("acme", "user", "likes", "zucchini pie", status="active")
    seeder.belief("acme", "user", "likes", "zucchini cake", status="conflict")
    seeder.turn("acme", "zucchini garden notes", tier="recent")
    found = mem.recall(query, tenant="acme", budget=50)
    texts = [e.text for e in found.entries()]
    assert sorted(texts) == ["the user likes zucchini cake", "the user likes zucchini pie",
                             "zucchini garden notes"]
    assert {f.status for f in found.facts} == {"active", "conflict"}
    texts = [e.text for e in mem.recall(query, tenant="acme", budget=50,
                                        strategy="archive").entries()]
    assert "zucchini harvest notes" in texts and not any("soup" in t or "bread" in t
                                                          for t in texts), texts


def test_session_bias_prefers_the_callers_chat(seeded, mem) -> None:
    seeder, _ = seeded
    seeder.turn("acme", "the meeting is on thursday", session="a")
    seeder.turn("acme", "the meeting is on thursday", session="b")
    for session in ("a", "b"):
        top = mem.recall("meeting thursday", tenant="acme", session_id=session).items[0]
        assert top.session_id == session and top.components["session"] == 1.0


def test_turn_fts_is_the_fallback_when_memory_has_nothing(seeded, mem, settings) -> None:
    _, db = seeded
    db.conn.execute("INSERT INTO turns (tenant, turn_uid, session_id, idx, speaker, "
                    "occurred_at, text, recorded_at) VALUES ('acme', 'raw1', 's', 1, 'user', "
                    "'2024-01-01T00:00:00.000000Z', 'only in the transcript: kumquat', "
                    "'2024-01-01T00:00:00.000000Z')")
    result = mem.recall("kumquat", tenant="acme")
    assert result.used_turn_fallback
    assert [i.item_id for i in result.items] == ["turn:raw1"]


def test_embedder_mismatch_gives_keyword_only_with_a_flag(seeded, settings) -> None:
    seeder, _ = seeded
    seeder.turn("acme", "the blue bicycle is in the garage")
    with Memory.open(settings, embedder=HashEmbedder(dim=64)) as other:
        result = other.recall("blue bicycle", tenant="acme")
    assert result.keyword_only and "mismatch" in result.degraded_reason
    assert result.items and all("episode_dense" not in i.components for i in result.items)


def test_a_broken_vector_table_gives_keyword_only(seeded, mem) -> None:
    seeder, db = seeded
    seeder.turn("acme", "the red kayak is at the lake")
    db.conn.execute("DROP TABLE episodes_vec_g1")
    dense_even_with_hash = RecallStrategy().with_(dense_with_keyword_embedder=True)
    result = mem.recall("red kayak", tenant="acme", strategy=dense_even_with_hash)
    assert result.keyword_only and "vector index" in result.degraded_reason
    assert result.items


def test_explanation_log_is_bounded_and_never_holds_the_query(settings, seeded) -> None:
    seeder, _ = seeded
    seeder.turn("acme", "secret plans about the zeppelin")
    seeder.belief("acme", "user", "plans_to", "board the zeppelin at dawn")
    seeder.tenant("default")
    settings = Settings.from_env({}, data_dir=settings.data_dir, recall_log_keep=5)
    query = "zeppelin plans xyzzy-unique-query"
    with Memory.open(settings) as m:
        for _ in range(8):
            result = m.recall(query, tenant="acme")
        assert result.facts and result.items  # both were logged, as ids
        m.recall("other tenant query", tenant="default")
        m.flush_recall_log()
        conn = m.ops_db.conn
        assert conn.execute("SELECT count(*) FROM recall_log WHERE tenant='acme'"
                            ).fetchone()[0] == 5
        rows = conn.execute("SELECT query_digest, strategy, explanation FROM recall_log"
                            ).fetchall()
        assert result.log_id is not None
        raw_open = b"".join(p.read_bytes() for p in settings.data_dir.glob("memory_ops.db*"))
    assert all("xyzzy" not in "".join(r) for r in rows)
    raw = raw_open + settings.ops_db_path.read_bytes()
    assert b"xyzzy" not in raw and b"secret plans" not in raw and b"at dawn" not in raw


def test_a_failing_explanation_costs_its_log_row_not_the_recall(seeded, mem,
                                                                 monkeypatch) -> None:
    """The explanation is built on the caller's thread; a bug there leaves that recall
    unlogged with a warning naming no text, and the next recall is logged again."""
    from structlog.testing import capture_logs

    from memory_core.recall import engine

    seeder, _ = seeded
    seeder.turn("acme", "the red kayak is in the garage")

    def broken(*args: object, **kwargs: object) -> str:
        raise KeyError("a bug")

    real = engine.build_explanation
    monkeypatch.setattr(engine, "build_explanation", broken)
    with capture_logs() as logs:
        result = mem.recall("red kayak", tenant="acme")
    assert result.items and result.log_id is None
    assert {"event": "recall_log_failed", "tenant": "acme", "error": "KeyError",
            "log_level": "warning"} in logs
    monkeypatch.setattr(engine, "build_explanation", real)
    assert mem.recall("red kayak", tenant="acme").log_id is not None


def test_one_recall_reads_one_state_of_the_store(seeded, mem, monkeypatch) -> None:
    """A write committed while a recall runs (here: between its entity list and its keyword
    lists) is not half-seen by it: every list reads the snapshot the recall began with. The
    next recall sees the write, and no recall leaves a transaction open."""
    from memory_core.recall import search

    seeder, _ = seeded
    seeder.turn("acme", "we talked about the weather")
    real = search.beliefs_about
    writes = []

    def write_meanwhile(*args: object, **kwargs: object) -> object:
        if not writes:
            writes.append(seeder.turn("acme", "the zeppelin departs at dawn"))
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "beliefs_about", write_meanwhile)
    during = mem.recall("zeppelin at dawn", tenant="acme")
    assert writes and not during.items
    after = mem.recall("zeppelin at dawn", tenant="acme")
    assert writes[0] in {u for item in after.items for u in item.turn_uids}
    assert not mem._state.conn.in_transaction
    with pytest.raises(UnknownTenantError):
        mem.recall("zeppelin", tenant="nobody")
    assert not mem._state.conn.in_transaction


def test_a_word_in_every_memory_of_a_tenant_is_its_stopword(seeded, mem) -> None:
    seeder, _ = seeded
    for i in range(120):
        seeder.turn("acme", f"Caroline: note {i} about the weather and tea")
    target = seeder.turn("acme", "Caroline: the violin lesson moved to friday")
    result = mem.recall("When is Caroline's violin lesson?", tenant="acme", budget=3)
    assert target in result.items[0].turn_uids
    conn = mem.state_db.conn
    assert plan_terms(conn, TermStats(), "episodes", ("caroline", "violin"), 5000, 0,
                      "acme", 0.2) == TermPlan(("violin",))
    assert plan_terms(conn, TermStats(), "episodes", ("caroline",), 5000, 0, "acme",
                      0.2) == TermPlan((), ("caroline",))
