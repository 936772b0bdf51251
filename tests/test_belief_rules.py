"""The pure belief rules, table-driven: trust order, content key, slot resolution."""

from __future__ import annotations

import itertools

import pytest

from memory_core.model.belief_rules import (
    FACT_PHRASES,
    SOURCES,
    Resolution,
    SlotBelief,
    content_key,
    count_contribution,
    fact_text,
    in_third_person,
    normalize_object,
    render_text,
    resolve_slot,
    trust_rank,
)
from memory_core.model.predicates import PREDICATES

D1, D2, D3, D4 = ("2024-01-01T00:00:00.000000Z", "2024-02-01T00:00:00.000000Z",
                  "2024-03-01T00:00:00.000000Z", "2024-04-01T00:00:00.000000Z")


def b(uid, obj, when, source="heuristic", status="active", stated=None, negated=False):
    return SlotBelief(uid, obj, when, source, status, None, stated, negated)


def test_trust_order_is_fixed_and_total() -> None:
    ranks = [trust_rank(s) for s in SOURCES]
    assert ranks == sorted(ranks, reverse=True)
    assert SOURCES[0] == "user_explicit" and SOURCES[-1] == "system_tool"
    with pytest.raises(ValueError, match="unknown belief source"):
        trust_rank("rumour")


@pytest.mark.parametrize(("a", "b_", "same"), [
    (("t", "s", "p", "o", D1, "heuristic"), ("t", "s", "p", "o", D1, "heuristic"), True),
    (("t", "s", "p", "o", D1, "heuristic"), ("t2", "s", "p", "o", D1, "heuristic"), False),
    (("t", "s", "p", "o", D1, "heuristic"), ("t", "s", "p", "o", D2, "heuristic"), False),
    (("t", "s", "p", "o", D1, "heuristic"), ("t", "s", "p", "o", D1, "user_explicit"), False),
    (("t", "s", "p", "o", D1, "heuristic"), ("t", "s", "p", "o2", D1, "heuristic"), False),
])
def test_content_key(a, b_, same) -> None:
    assert (content_key(*a) == content_key(*b_)) is same


def test_negation_has_its_own_key_and_objects_normalise() -> None:
    assert content_key("t", "s", "p", "o", D1, "heuristic", True) != \
        content_key("t", "s", "p", "o", D1, "heuristic")
    assert normalize_object("  The   Berlin. ") == normalize_object("the berlin")
    assert render_text("Sam", "lives_in", "Berlin") == "Sam lives in Berlin"


F = True  # functional
N = False

# (case, functional, beliefs, expected {uid: (status, valid_to)})
CASES = [
    ("newer closes older", F, [b("a", "berlin", D1), b("b", "munich", D2)],
     {"a": ("superseded", D2), "b": ("active", None)}),
    ("earlier newcomer is inserted closed", F, [b("b", "munich", D2), b("a", "berlin", D1)],
     {"a": ("superseded", D2), "b": ("active", None)}),
    ("user_explicit is protected from lower trust", F,
     [b("u", "berlin", D1, "user_explicit"), b("h", "munich", D2, "heuristic")],
     {"u": ("active", None), "h": ("conflict", None)}),
    ("user_explicit yields to user_explicit", F,
     [b("u", "berlin", D1, "user_explicit"), b("v", "paris", D2, "user_explicit")],
     {"u": ("superseded", D2), "v": ("active", None)}),
    ("lower trust earlier is closed by user_explicit", F,
     [b("h", "munich", D1, "llm_inferred"), b("u", "berlin", D2, "user_explicit")],
     {"h": ("superseded", D2), "u": ("active", None)}),
    ("operator is not protected", F,
     [b("o", "berlin", D1, "operator"), b("h", "munich", D2, "heuristic")],
     {"o": ("superseded", D2), "h": ("active", None)}),
    ("same object from lower trust is absorbed", F,
     [b("u", "berlin", D1, "user_explicit"), b("h", "berlin", D2, "heuristic")],
     {"u": ("active", None), "h": ("superseded", D2)}),
    ("ties: more trusted wins", F,
     [b("h", "munich", D1, "heuristic"), b("o", "berlin", D1, "operator")],
     {"h": ("superseded", D1), "o": ("active", None)}),
    ("sticky statuses stay", F,
     [b("a", "berlin", D1), b("x", "munich", D2, status="invalidated"),
      b("p", "rome", D3, status="pending_review")],
     {"a": ("active", None), "x": ("invalidated", None), "p": ("pending_review", None)}),
    ("an expired commitment stays expired and takes no part", N,
     [b("e", "visit rome", D1, status="expired"), b("n", "visit rome", D3)],
     {"e": ("expired", None), "n": ("active", None)}),
    ("non-functional values coexist", N, [b("a", "jazz", D1), b("b", "chess", D2)],
     {"a": ("active", None), "b": ("active", None)}),
    ("non-functional restatement closes the older copy", N,
     [b("a", "jazz", D1), b("b", "jazz", D2)],
     {"a": ("superseded", D2), "b": ("active", None)}),
    ("stated end kept while active", N, [b("a", "trip", D1, stated=D3)],
     {"a": ("active", D3)}),
    ("stated end earlier than successor", F,
     [b("a", "berlin", D1, stated=D2), b("b", "munich", D3)],
     {"a": ("superseded", D2), "b": ("active", None)}),
    ("negation ends the same object", F,
     [b("a", "berlin", D1), b("n", "berlin", D2, negated=True)],
     {"a": ("superseded", D2), "n": ("superseded", D2)}),
    ("negation of another object does nothing", F,
     [b("a", "berlin", D1), b("n", "munich", D2, negated=True)],
     {"a": ("active", None), "n": ("superseded", D2)}),
    ("lower-trust negation of user_explicit is a conflict", F,
     [b("u", "berlin", D1, "user_explicit"), b("n", "berlin", D2, negated=True)],
     {"u": ("active", None), "n": ("conflict", None)}),
    ("chain of three", F, [b("c", "rome", D3), b("a", "berlin", D1), b("b", "munich", D2)],
     {"a": ("superseded", D2), "b": ("superseded", D3), "c": ("active", None)}),
]


@pytest.mark.parametrize(("case", "functional", "beliefs", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_resolve_slot(case, functional, beliefs, expected) -> None:
    got = resolve_slot(beliefs, functional)
    assert {k: (v.status, v.valid_to) for k, v in got.items()} == expected


@pytest.mark.parametrize(("case", "functional", "beliefs", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_resolution_ignores_arrival_order(case, functional, beliefs, expected) -> None:
    results = {tuple(sorted(resolve_slot(list(p), functional).items()))
               for p in itertools.permutations(beliefs)}
    assert len(results) == 1


def test_at_most_one_active_per_functional_slot() -> None:
    beliefs = [b(str(i), f"o{i % 3}", f"2024-01-0{1 + i % 5}T00:00:00.000000Z", s)
               for i, s in enumerate(SOURCES * 2)]
    got = resolve_slot(beliefs, True)
    assert sum(r.status == "active" for r in got.values()) == 1
    assert all(isinstance(r, Resolution) for r in got.values())


@pytest.mark.parametrize(("status", "subject", "obj", "expected"), [
    ("active", "s", None, {"s": (1, 0)}),
    ("conflict", "s", "o", {"s": (1, 1), "o": (1, 1)}),
    ("active", "s", "s", {"s": (1, 0)}),
    ("superseded", "s", "o", {}),
    ("invalidated", "s", "o", {}),
])
def test_count_contribution(status, subject, obj, expected) -> None:
    assert count_contribution(status, subject, obj) == expected


# (new predicate, new object, new due, old predicate, old object, old due, ends the old one)
TOPICS = [
    ("prefers", "mild food", None, "likes", "spicy food", None, True),
    ("likes", "thai food", None, "prefers", "spicy food", None, True),
    ("prefers", "mild food", None, "likes", "jazz", None, False),  # another topic
    ("prefers", "tea", None, "likes", "coffee", None, False),  # no head word to share
    ("prefers", "mild food", None, "prefers", "mild food", None, False),  # a restatement
    ("likes", "spicy food", None, "dislikes", "bland food", None, False),  # not a preference
    ("plans_to", "go to seoul", D4, "plans_to", "go to japan", D4, True),
    ("plans_to", "go to seoul", D4, "plans_to", "go to japan", D3, False),  # another date
    ("plans_to", "go to seoul", None, "plans_to", "go to japan", None, False),  # undated
    ("plans_to", "go to seoul", D4, "plans_to", "finish the deck", D4, False),
    ("lives_in", "denver", None, "lives_in", "boston", None, False),  # functional: the slot
]


@pytest.mark.parametrize(("new_p", "new_o", "new_due", "old_p", "old_o", "old_due", "ends"),
                         TOPICS)
def test_a_replacing_statement_ends_the_same_topic(new_p, new_o, new_due, old_p, old_o,
                                                   old_due, ends) -> None:
    from memory_core.model.belief_rules import Stated, replaces_topic

    assert replaces_topic(Stated(new_p, new_o, new_due), Stated(old_p, old_o, old_due)) is ends


def test_every_fact_phrase_names_a_predicate_and_reads_as_a_sentence() -> None:
    """What the model reads: "Maya follows a vegan diet", not "Maya diet vegan"."""
    assert set(FACT_PHRASES) <= set(PREDICATES)
    assert fact_text("Maya", "diet", "vegan") == "Maya follows a vegan diet"
    assert fact_text("Maya", "favorite", "color: blue") == "Maya's favorite color: blue"
    assert fact_text("Maya", "lives_in", "Denver") == "Maya lives in Denver"  # its own phrase
    for predicate in FACT_PHRASES:
        text = fact_text("Maya", predicate, "OBJ")
        assert text.startswith("Maya") and "OBJ" in text and "{" not in text
        assert render_text("Maya", predicate, "OBJ") != text  # stored text unchanged


@pytest.mark.parametrize(("obj", "speaker", "expected"), [
    ("my online store", None, "their online store"),
    ("having movie marathons with our friends", None, "having movie marathons with their friends"),
    ("bring my laptop with me", None, "bring their laptop with them"),
    ("I had a tattoo of my four dogs", None, "they had a tattoo of their four dogs"),
    ("talking about what we're thankful for", None, "talking about what they're thankful for"),
    ("I am allergic to nuts", None, "they are allergic to nuts"),
    ("my lasagna", "Maya", "Maya's lasagna"),
    ("time for me", "the user", "time for the user"),
    ("My Little Pony", None, "My Little Pony"),  # a name
    ("Jon, Just do it", None, "Jon, Just do it"),
    ("mystery novels and summer", None, "mystery novels and summer"),  # words, not pronouns
    ("a book about World War I", None, "a book about World War I"),  # a numeral
    ("drive down I-95 with my dad", None, "drive down I-95 with their dad"),
    ("what we need", None, "what they need"),
])
def test_first_person_words_of_an_object_are_its_speakers(obj: str, speaker: str | None,
                                                          expected: str) -> None:
    assert in_third_person(obj, speaker) == expected
