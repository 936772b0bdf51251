"""The speaker component, the feedback round and dated episode text."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.model.episodes import episode_text
from memory_core.recall import feedback
from memory_core.recall.candidates import Candidate
from memory_core.recall.query import names
from memory_core.recall.strategy import DEFAULT, PRESETS

pytest_plugins = ("tests.helpers.recall_fixtures",)


def test_episode_text_carries_the_day() -> None:
    assert episode_text("Ana", "hi", "2023-05-08T13:56:00.000000Z") == "[8 May 2023] Ana: hi"
    assert episode_text("Ana", "hi", datetime(2024, 1, 31, tzinfo=UTC)) == \
        "[31 January 2024] Ana: hi"
    assert episode_text("Ana", "hi") == "Ana: hi"
    assert episode_text("Ana", "hi", "not a time") == "Ana: hi"


def test_names_finds_speakers_by_full_name_or_first_word() -> None:
    assert names("What does Ana like?", ["Ana", "Bo", None]) == {"Ana"}
    assert names("and ana smith's dog?", ["Ana Smith"]) == {"Ana Smith"}
    assert names("Banana bread", ["Ana"]) == frozenset()
    assert names("what did I say", ["I", "user"]) == frozenset()  # a stopword is no name


def test_the_speaker_named_in_the_query_is_preferred(seeded, mem) -> None:
    seeder, _ = seeded
    other = seeder.turn("acme", "I went hiking in the mountains", speaker="Bo")
    ana = seeder.turn("acme", "I went hiking by the lake", speaker="Ana")
    result = mem.recall("Where did Ana go hiking?", tenant="acme", budget=2)
    assert ana in result.items[0].turn_uids
    assert result.items[0].components["speaker"] == 1.0
    assert any(other in i.turn_uids and i.components["speaker"] == 0.0 for i in result.items)


def test_feedback_reaches_a_memory_that_shares_words_with_the_best_hit(seeded, mem) -> None:
    seeder, _ = seeded
    seeder.turn("acme", "My daughter Zelda started violin lessons", session="s1")
    for i in range(30):
        seeder.turn("acme", f"filler {i} about weather and traffic", session="s2")
    second = seeder.turn("acme", "Zelda played at the school concert on Friday", session="s3")
    plain = mem.recall("Who takes violin lessons?", tenant="acme")
    assert all(second not in i.turn_uids for i in plain.items)
    assert "feedback_ms" not in plain.timings_ms
    result = mem.recall("Who takes violin lessons?", tenant="acme",
                        strategy=DEFAULT.with_(feedback_seeds=4))
    assert any(second in i.turn_uids for i in result.items)
    assert "feedback_ms" in result.timings_ms


def test_seed_terms_keep_the_query_first_and_drop_numbers() -> None:
    seed = Candidate(kind="episode", row_id=1, uid="e1", text="[8 May 2023] Ana: Zelda plays "
                     "violin", occurred_at=None)
    assert feedback.seed_terms(("violin",), [seed]) == ("violin", "may", "ana", "zelda",
                                                          "plays")


def test_only_the_multi_hop_preset_runs_the_feedback_round() -> None:
    assert {name: s.feedback_seeds > 0 for name, s in PRESETS.items()} == {
        "default": False, "keyword": False, "fast": False, "archive": False, "multi_hop": True}
    assert PRESETS["multi_hop"].to_dict()["feedback"]["seeds"] == 4
