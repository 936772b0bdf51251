"""The predicate vocabulary and subject/object hygiene (pure rules)."""

from __future__ import annotations

import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidInputError, UnknownPredicateError
from memory_core.model.hygiene import (
    SPEAKER,
    RejectReason,
    check_subject,
    is_payload_object,
    normalize_label,
)
from memory_core.model.predicates import PREDICATES, PredicateSpec, get_predicate, is_functional

# --- predicates ---------------------------------------------------------------------------


def test_vocabulary_size_and_shape() -> None:
    # A closed vocabulary: a new predicate must earn its place (47 since session 21's plays
    # and practices: "What instruments does Tim play?", "What martial arts has John done?";
    # 49 since session 22's read and watched: "What books has Tim read?").
    assert 30 <= len(PREDICATES) <= 50
    for name, spec in PREDICATES.items():
        assert isinstance(spec, PredicateSpec) and spec.name == name
        assert name.islower() and " " not in name
        assert spec.object_kind in ("entity", "literal", "date")
        assert spec.description


@pytest.mark.parametrize(
    ("name", "functional", "kind"),
    [
        ("name_is", True, "literal"),
        ("age_is", True, "literal"),
        ("lives_in", True, "entity"),
        ("works_at", True, "entity"),
        ("job_title_is", True, "literal"),
        ("married_to", True, "entity"),
        ("born_on", True, "date"),
        ("likes", False, "entity"),
        ("has_child", False, "entity"),
        ("has_pet", False, "entity"),
        ("related_to", False, "entity"),
        ("plans_to", False, "literal"),
        ("committed_to", False, "literal"),
        ("decided", False, "literal"),
        ("remembers", False, "literal"),
    ],
)
def test_key_predicates(name: str, functional: bool, kind: str) -> None:
    spec = get_predicate(name)
    assert (spec.functional, spec.object_kind) == (functional, kind)
    assert is_functional(name) is functional


def test_unknown_predicate_names_the_choices_and_the_module() -> None:
    with pytest.raises(UnknownPredicateError) as info:
        get_predicate("loves_to_live_in")
    message = str(info.value)
    assert "'loves_to_live_in'" in message and "lives_in" in message and "works_at" in message
    assert "memory_core/model/predicates.py" in message
    assert isinstance(info.value, InvalidInputError)


@pytest.mark.parametrize("bad", ["", "Lives_In", None, 3, ["lives_in"]])
def test_non_names_are_unknown(bad: object) -> None:
    with pytest.raises(UnknownPredicateError):
        get_predicate(bad)  # type: ignore[arg-type]


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        PREDICATES["x"] = PREDICATES["likes"]  # type: ignore[index]


# --- hygiene: subjects --------------------------------------------------------------------

JUNK = [
    ("", "empty"),
    ("   ", "empty"),
    ("x" * 200, "too_long"),
    ("one two three four five six seven", "too_long"),
    ("Anna\x00", "control_chars"),
    ("https://example.com/page", "url_or_path"),
    ("/etc/passwd", "url_or_path"),
    ("~/notes.md", "url_or_path"),
    ("C:\\Users\\me", "url_or_path"),
    ("config.yaml", "url_or_path"),
    ("example.com", "url_or_path"),
    ("42", "number_only"),
    ("3.14", "number_only"),
    ("1,000", "number_only"),
    ("kazma_v2_4_0", "version_string"),
    ("v2.4.0", "version_string"),
    ("v2", "version_string"),
    ("2.4.0", "version_string"),
    ("python3.11", "version_string"),
    ("react@18", "version_string"),
    ("lodash@^4.17", "version_string"),
    ("node_modules", "stack_token"),
    ("__init__", "stack_token"),
    ("os.path", "stack_token"),
    ("foo()", "stack_token"),
    ("std::vector", "stack_token"),
    ("{x}", "stack_token"),
    ("it", "pronoun"),
    ("They", "pronoun"),
    ("that", "pronoun"),
    ("myself", "pronoun"),
    ("this project", "deictic"),
    ("your idea", "deictic"),
    ("her book", "deictic"),
    ("the", "fragment"),
    ("of the", "fragment"),
    ("and", "fragment"),
    ("in Paris", "fragment"),
    ("Bank of", "fragment"),
    ("!!!", "fragment"),
    ("🙂", "fragment"),
    ("A", "fragment"),
]


@pytest.mark.parametrize(("label", "reason"), JUNK, ids=[repr(j[0])[:30] for j in JUNK])
def test_junk_subjects_are_rejected_with_a_reason(label: str, reason: str) -> None:
    assert check_subject(label) == reason


GOOD = [
    SPEAKER, "Melanie", "Caroline", "Anna Müller", "New York City", "Bank of America", "Google",
    "the Beatles", "my sister", "O'Brien", "Windows 11", "F1", "Zoë", "北京", "Max",
    "To Kill a Mockingbird", "LGBTQ support group", "AT&T", "Jean-Luc",
]  # fmt: skip


@pytest.mark.parametrize("label", GOOD)
def test_real_subjects_pass(label: str) -> None:
    assert check_subject(label) is None


def test_reasons_are_the_declared_literals() -> None:
    declared = set(typing.get_args(RejectReason))
    assert {reason for _, reason in JUNK} <= declared


@pytest.mark.parametrize(
    ("label", "key"),
    [
        ("  Anna   Müller ", "anna müller"),
        ("ＡＮＮＡ", "anna"),  # full-width folds under NFKC
        ("Straße", "strasse"),  # casefold, not lower
        ("ﬁsh\tand\nchips", "fish and chips"),
        ("", ""),
    ],
)
def test_normalize_label(label: str, key: str) -> None:
    assert normalize_label(label) == key


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_hygiene_is_total(label: str) -> None:
    reason = check_subject(label)
    assert reason is None or reason in typing.get_args(RejectReason)
    key = normalize_label(label)
    assert normalize_label(key) == key
    assert isinstance(is_payload_object(label), bool)


# --- hygiene: objects ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "payload"),
    [
        ("Paris", False),
        ("Google", False),
        ("sushi", False),
        ("my sister", False),
        ("pottery workshop", False),
        ("https://example.com", True),
        ("scripts/build-release.sh", True),
        ("42", True),
        ("$1,200", True),
        ("5 km", True),
        ("2023-05-08", True),
        ("May 5", True),
        ("3rd of September", True),
        ("Sept. 12, 2024", True),
        ("june", True),
        # names that begin like a month are names, not dates (the user Maya is an entity)
        ("Maya", False),
        ("Marcus", False),
        ("Janet", False),
        ("Augusta", False),
        ("Novella", False),
        ("1990", True),
        ("v2.4.0", True),
        ("kazma_v2_4_0", True),
        ('"Inception"', True),
        ("food: sushi", True),
        ("finish the quarterly report before the board meeting", True),
        ("", True),
    ],
)
def test_is_payload_object(text: str, payload: bool) -> None:
    assert is_payload_object(text) is payload
