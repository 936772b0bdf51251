"""The heuristic extractor: precision/recall on hand-written turns, rule families, robustness.

The case file ``tests/data/extraction_cases.jsonl`` holds one turn per line: ``text``,
``speaker``, ``occurred_at`` and ``expected``, a list of ``[subject, predicate, object]``
with an optional fourth element ``{"valid_from": "YYYY-MM-DD", "valid_to": ...,
"negated": true}``. Subjects are ``"@speaker"`` or a surface name. Objects match
case-insensitively with whitespace collapsed and a leading article ignored.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidInputError
from memory_core.extraction.heuristic import CandidateBelief, TurnText, extract_heuristic
from memory_core.model.hygiene import check_subject
from memory_core.model.predicates import PREDICATES

CASES_PATH = Path(__file__).parent / "data" / "extraction_cases.jsonl"
MIN_PRECISION = 0.95
MIN_RECALL = 0.6
MIN_DATE_ACCURACY = 0.9
ANCHOR = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday

Key = tuple[str, str, str, bool]


def _norm(text: str) -> str:
    words = text.casefold().replace("’", "'").strip(" .,!?").split()
    if len(words) > 1 and words[0] in ("a", "an", "the"):
        words = words[1:]
    return " ".join(words)


def _key(subject: str, predicate: str, obj: str, negated: bool) -> Key:
    return (_norm(subject), predicate, _norm(obj), negated)


def _load_cases() -> list[dict]:
    with CASES_PATH.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _turn(text: str, when: datetime = ANCHOR, speaker: str = "user") -> TurnText:
    return TurnText(text=text, speaker=speaker, occurred_at=when)


def _triples(text: str, when: datetime = ANCHOR) -> set[tuple[str, str, str]]:
    return {(c.subject, c.predicate, _norm(c.object)) for c in extract_heuristic(_turn(text, when))}


@dataclass(frozen=True)
class Score:
    true_pos: int
    false_pos: int
    false_neg: int
    dates_checked: int
    dates_right: int
    errors: tuple[str, ...]

    @property
    def precision(self) -> float:
        return self.true_pos / max(1, self.true_pos + self.false_pos)

    @property
    def recall(self) -> float:
        return self.true_pos / max(1, self.true_pos + self.false_neg)

    @property
    def date_accuracy(self) -> float:
        return self.dates_right / max(1, self.dates_checked)

    def summary(self) -> str:
        return (
            f"extraction: precision={self.precision:.3f} recall={self.recall:.3f} "
            f"(tp={self.true_pos} fp={self.false_pos} fn={self.false_neg}); "
            f"dates {self.dates_right}/{self.dates_checked}"
        )


def _day(value: datetime | None) -> str | None:
    return value.date().isoformat() if value else None


def _score_case(case: dict) -> tuple[int, int, int, int, int, list[str]]:
    when = datetime.fromisoformat(case["occurred_at"].replace("Z", "+00:00"))
    got: dict[Key, CandidateBelief] = {}
    for cand in extract_heuristic(_turn(case["text"], when, case["speaker"])):
        got[_key(cand.subject, cand.predicate, cand.object, cand.negated)] = cand
    expected: dict[Key, dict] = {}
    for item in case["expected"]:
        extra = item[3] if len(item) > 3 else {}
        expected[_key(item[0], item[1], item[2], bool(extra.get("negated")))] = extra
    tp = len(got.keys() & expected.keys())
    errors = [f"#{case['id']} FP {k}" for k in got.keys() - expected.keys()]
    errors += [f"#{case['id']} FN {k}" for k in expected.keys() - got.keys()]
    checked = right = 0
    for key in got.keys() & expected.keys():
        for field in ("valid_from", "valid_to"):
            if field in expected[key]:
                checked += 1
                actual = _day(getattr(got[key], field))
                if actual == expected[key][field]:
                    right += 1
                else:
                    errors.append(f"#{case['id']} {field} {key}: {actual}")
    return tp, len(got) - tp, len(expected) - tp, checked, right, errors


@pytest.fixture(scope="module")
def score() -> Score:
    totals = [0, 0, 0, 0, 0]
    errors: list[str] = []
    for case in _load_cases():
        *counts, case_errors = _score_case(case)
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        errors += case_errors
    return Score(*totals, errors=tuple(errors))


def _report(request: pytest.FixtureRequest, line: str) -> None:
    """Print past output capture, so a plain ``pytest -q`` run shows the figures."""
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(line)


def test_case_file_is_big_and_varied() -> None:
    cases = _load_cases()
    assert len(cases) >= 80
    assert sum(1 for c in cases if not c["expected"]) >= 20
    for case in cases:
        for item in case["expected"]:
            assert item[1] in PREDICATES, item
        datetime.fromisoformat(case["occurred_at"].replace("Z", "+00:00"))


def test_precision_and_recall_on_case_file(score: Score, request: pytest.FixtureRequest) -> None:
    _report(request, score.summary())
    detail = score.summary() + "\n" + "\n".join(score.errors)
    assert score.precision >= MIN_PRECISION, detail
    assert score.recall >= MIN_RECALL, detail


def test_dates_of_matched_beliefs(score: Score) -> None:
    assert score.dates_checked >= 20
    assert score.date_accuracy >= MIN_DATE_ACCURACY, score.summary() + "\n" + "\n".join(
        e for e in score.errors if "valid_" in e
    )


# --- rule families: each row is (text, triples that must all be present) -------------------
S = "@speaker"
FAMILIES = {
    "identity": [
        ("My name is Priya Patel.", {(S, "name_is", "priya patel")}),
        ("You can call me Jo.", {(S, "preferred_name_is", "jo")}),
        ("I'm 41 years old.", {(S, "age_is", "41")}),
        ("I identify as non-binary.", {(S, "gender_identity_is", "non-binary")}),
        ("I'm Italian by birth.", {(S, "nationality_is", "italian")}),
        ("My first language is Tagalog.", {(S, "speaks", "tagalog")}),
        ("My birthday is May 5.", {(S, "born_on", "may 5")}),
    ],
    "location": [
        ("I live in Lyon.", {(S, "lives_in", "lyon")}),
        ("We live in a small town in Maine.", {(S, "lives_in", "maine")}),
        ("I'm from Osaka.", {(S, "comes_from", "osaka")}),
        ("I was born in Cork.", {(S, "born_in", "cork")}),
        ("I moved to Austin in 2021.", {(S, "lives_in", "austin"), (S, "moved_to", "austin")}),
        ("I visited Prague last spring.", {(S, "visited", "prague")}),
    ],
    "work": [
        ("I work for Acme Corp.", {(S, "works_at", "acme corp")}),
        ("I'm a registered nurse.", {(S, "job_title_is", "registered nurse")}),
        ("I'm working at the design team at Figma.", {(S, "works_at", "figma")}),
        ("I study at Oxford.", {(S, "studies_at", "oxford")}),
        ("I'm majoring in biology.", {(S, "studies", "biology")}),
    ],
    "preferences": [
        ("I love sushi.", {(S, "likes", "sushi")}),
        ("I enjoy gardening and knitting.", {(S, "likes", "gardening"), (S, "likes", "knitting")}),
        ("I hate traffic.", {(S, "dislikes", "traffic")}),
        ("I prefer trains to planes.", {(S, "prefers", "trains to planes")}),
        ("My favorite color is green.", {(S, "favorite", "color: green")}),
    ],
    "relationships": [
        ("My sister Anna is visiting.", {(S, "has_sibling", "anna")}),
        ("My wife Jen is amazing.", {(S, "married_to", "jen")}),
        ("I have two kids.", {(S, "child_count_is", "2")}),
        ("Melanie is my friend.", {(S, "friend_of", "melanie")}),
        ("My coworker Raj sits next to me.", {(S, "colleague_of", "raj")}),
        ("My mom Linda lives in Ohio.",
         {(S, "has_parent", "linda"), ("Linda", "lives_in", "ohio")}),
    ],
    "possessions": [
        ("I have a dog named Max.", {(S, "has_pet", "max"), ("Max", "is_a", "dog")}),
        ("My cat Whiskers is asleep.", {(S, "has_pet", "whiskers"), ("Whiskers", "is_a", "cat")}),
        ("I own a Tesla.", {(S, "owns", "tesla")}),
        ("I bought a kayak yesterday.", {(S, "bought", "kayak")}),
    ],
    "plans": [
        ("I'm going to Paris next Friday.", {(S, "plans_to", "go to paris")}),
        ("I will finish the deck tomorrow.", {(S, "plans_to", "finish the deck")}),
        ("I promised to call Sam by Monday.", {(S, "committed_to", "call sam")}),
        ("I'm planning to learn Rust.", {(S, "plans_to", "learn rust")}),
        ("We will plan the party next week.", {(S, "plans_to", "plan the party")}),
    ],
    "decisions_and_events": [
        ("We decided to get a puppy.", {(S, "decided", "get a puppy")}),
        ("I've decided to quit my job.", {(S, "decided", "quit my job")}),
        ("I attended a conference in Berlin last week.", {(S, "attended", "conference")}),
        ("I went to a concert yesterday.", {(S, "attended", "concert")}),
    ],
    "explicit": [
        ("Remember that I'm allergic to shellfish.",
         {(S, "remembers", "i'm allergic to shellfish")}),
        ("Please note: the spare key is under the mat.",
         {(S, "remembers", "the spare key is under the mat")}),
    ],
}


def test_an_assistants_remember_is_advice_not_a_request() -> None:
    advice = "Remember, the key to successful pickling is a steady ratio of cucumbers to brine."
    assert not [c for c in extract_heuristic(_turn(advice, speaker="assistant"))
                if c.predicate == "remembers"]
    assert not [c for c in extract_heuristic(_turn(advice, speaker=" Assistant "))
                if c.predicate == "remembers"]
    # The user's own request is still one, and so is a named speaker's (LoCoMo's speakers are
    # two people talking). (Counsel without the speaker in it is none from anyone since
    # session 21: test_advice_to_remember_is_no_memory.)
    request = "Remember, my sister's birthday is May 3."
    assert ("remembers" in {c.predicate for c in extract_heuristic(_turn(request))})
    assert ("remembers" in {c.predicate
                            for c in extract_heuristic(_turn(request, speaker="Jon"))})
    assert not [c for c in extract_heuristic(_turn(request, speaker="assistant"))
                if c.predicate == "remembers"]


@pytest.mark.parametrize("text", [
    "Hello, I am Zarina. I appreciate your interest in my thoughts and ideas.",  # role-play
    "I love the modification! Adding the date of your visit adds a personal touch.",
    "Rodinal is a great developer to experiment with! Rodinal is a high-contrast developer.",
    "Certainly! Here's a speech: Ladies and Gentlemen, I am Shabbir Degani and I moved to "
    "Boston last year.",  # a draft for the user
    "I'd be happy to help you plan to raise $500 for the shelter.",
    "Eckhart Tolle is a spiritual teacher. I plan to read his books next week.",
])
def test_an_assistants_turn_is_no_source_of_beliefs(text: str) -> None:
    """Memory holds what the user (or a named person) says: an assistant's first-person
    sentences are drafts, role-play and pleasantries, its others world knowledge (seen in a
    LongMemEval store: "assistant name is Donate", "assistant plans to raise $500",
    "Rodinal job title is high-contrast developer")."""
    assert extract_heuristic(_turn(text, speaker="assistant")) == []
    assert extract_heuristic(_turn(text, speaker=" Assistant ")) == []


def test_the_same_words_from_the_user_are_beliefs() -> None:
    said = extract_heuristic(_turn("I love hiking. I moved to Boston last year."))
    assert {(c.predicate, c.object) for c in said} >= {("likes", "hiking"),
                                                      ("moved_to", "Boston")}


@pytest.mark.parametrize(("speaker", "text", "name"), [
    ("user", "Congrats again! Love is truly magical.", None),  # greetings, not names
    ("user", "Looky here, I got this new pup for you!", None),
    ("user", "Cheers again, mate.", None),
    ("user", "Bye again! Talk soon.", None),
    ("user", "You have no queen. Try again.", None),  # nor requests to an assistant
    ("user", "Wrong again.", None),
    ("user", "Ken again.", None),  # "X again" is too often that: only "it's X again" is a name
    ("user", "Click here.", None),
    ("user", "Donate here: https://example.org/give", None),  # a call to action, with a link
    ("user", "Register here!", None),
    ("user", "Nadia here: quick question.", "Nadia"),
    ("user", "Hi, Nadia here.", "Nadia"),  # the user introducing themselves
    ("user", "Hi, it's Ken again. It happened.", "Ken"),
    ("user", "It's Maya here!", "Maya"),
    ("Tim", "Congrats again! I'm so happy for you.", None),
    ("Maria", "Hi, it's Ken again.", None),  # a named speaker's "it's X again" is someone else
    ("Caroline", "I'm Mel, by the way.", None),
    ("Tim", "Tim here! How are you?", "Tim"),  # or their own name, or a longer or shorter one
    ("Tim", "Tim Smith here!", "Tim Smith"),
    ("Melanie", "I'm Mel, by the way.", "Mel"),
    ("Maria", "My name is Ken.", "Ken"),  # said outright: taken from whoever says it
])
def test_a_greeting_is_no_name_and_a_named_speaker_introduces_only_themselves(
        speaker: str, text: str, name: str | None) -> None:
    """"X here" / "it's X again" / "I'm X" name the speaker weakly: a greeting word is no name,
    and a speaker whose name the turn already gives (not the user) is named only by a form
    of that name."""
    names = [c.object for c in extract_heuristic(_turn(text, speaker=speaker))
             if c.predicate == "name_is"]
    assert names == ([name] if name else []), names


@pytest.mark.parametrize(
    ("text", "expected"),
    [pytest.param(t, e, id=f"{family}-{i}") for family, rows in FAMILIES.items()
     for i, (t, e) in enumerate(rows)],
)
def test_rule_families(text: str, expected: set[tuple[str, str, str]]) -> None:
    got = {(s, p, o) for s, p, o in _triples(text)}
    want = {(s, p, _norm(o)) for s, p, o in expected}
    assert want <= got, f"missing {want - got}; got {got}"


NOTHING = [
    "Where do you live?",
    "Do you think I should move to Berlin?",
    "If I lived in Tokyo I'd eat ramen daily.",
    "I would love to visit Peru.",
    "Maybe I'll get a cat.",
    "My brother said he lives in Rome.",
    "Apparently I work at Google now, according to LinkedIn.",
    'He goes "I live in Madrid" and walks off.',
    "I've never lived in Paris.",
    "I love it!",
    "I love that you asked.",
    "I like your style.",
    "I'm going to be honest.",
    "I'll be there tomorrow.",
    "I'm 10 minutes late, sorry.",
    "kazma_v2_4_0 lives in production.",
    "react@18 works at runtime.",
    "They live in Boston.",
    "It works for me.",
    "```\nI live in Paris\n```",
    "x = call_me(Bob) -> I work at Acme",
    "If I get the job, I'm moving to Boston next month.",
    # A plan to plan says nothing (LongMemEval: "the user plans to plan" was a fact).
    "I think I'll plan for the fall season.",
    "I plan to plan.",
]


@pytest.mark.parametrize("text", NOTHING)
def test_no_belief_from_questions_hypotheticals_reports_and_code(text: str) -> None:
    assert extract_heuristic(_turn(text)) == []


@pytest.mark.parametrize(
    ("text", "predicate", "obj"),
    [
        ("I don't live in Paris anymore.", "lives_in", "paris"),
        ("I no longer work at IBM.", "works_at", "ibm"),
        ("I moved out of Boston last year.", "lives_in", "boston"),
        ("I broke up with Jake.", "has_partner", "jake"),
        ("I'm no longer a teacher.", "job_title_is", "teacher"),
    ],
)
def test_negations_close_instead_of_asserting(text: str, predicate: str, obj: str) -> None:
    [cand] = [c for c in extract_heuristic(_turn(text)) if c.predicate == predicate]
    assert cand.negated and _norm(cand.object) == obj and cand.valid_from is None


def test_explicit_statements_are_user_explicit_and_confident() -> None:
    [name] = extract_heuristic(_turn("My name is Ada."))
    assert (name.source, name.predicate) == ("user_explicit", "name_is")
    [plan] = extract_heuristic(_turn("Remember: I'm moving to Denver next month."))
    assert (plan.source, plan.predicate) == ("user_explicit", "plans_to")
    assert plan.confidence >= 0.9
    [liking] = extract_heuristic(_turn("I love sushi."))
    assert liking.source == "heuristic" and liking.confidence < plan.confidence


@pytest.mark.parametrize(
    ("text", "field", "day"),
    [
        ("I moved to Austin last year.", "valid_from", date(2022, 1, 1)),
        ("I adopted a cat named Luna two weeks ago.", "valid_from", date(2023, 4, 24)),
        ("I went to a concert yesterday.", "valid_from", date(2023, 5, 7)),
        ("I'm going to Paris next Friday.", "valid_to", date(2023, 5, 13)),
        ("I promised to send the slides by Friday.", "valid_to", date(2023, 5, 13)),
        ("I have to renew my passport before August.", "valid_to", date(2023, 8, 1)),
    ],
)
def test_relative_dates_resolve_against_the_turn_time(text: str, field: str, day: date) -> None:
    cands = [c for c in extract_heuristic(_turn(text)) if getattr(c, field) is not None]
    assert cands, text
    assert {getattr(c, field).date() for c in cands} == {day}


def test_future_date_in_a_past_event_is_not_its_date() -> None:
    [cand] = extract_heuristic(_turn("We decided to sell the house next spring."))
    assert cand.valid_from is None


def test_plan_without_a_date_is_not_a_plan() -> None:
    assert extract_heuristic(_turn("I'm going to finish the report.")) == []


def test_naive_turn_time_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        extract_heuristic(TurnText("I live in Paris.", "user", datetime(2023, 5, 8)))


def test_one_megabyte_input_finishes_quickly() -> None:
    # CPU time, not wall time: extraction is pure computation (a regex that backtracks shows
    # here), and a loaded machine stretches only the wall clock.
    sentence = "I live in Boston and my sister Anna works at Google, we love hiking. "
    for text in (sentence * 15_000, "I love " + "a " * 500_000, "`" * 1_000_000,
                 "My friend " + "Anna " * 200_000, "\x00" * 1_000_000):  # fmt: skip
        started = time.thread_time()
        extract_heuristic(_turn(text[:1_000_000]))
        assert time.thread_time() - started < 2.0


# --- robustness ----------------------------------------------------------------------------
_FRAGMENTS = [
    "I live in ", "my sister ", "Anna", " named ", "I'm ", "a nurse", " at ", "Google", ", ",
    "I love ", " and ", "I don't ", "remember that ", "next Friday", " last year", "?", ".",
    "I'm going to ", "\x00", "😀", "İ", "ß", "\u202e", "```", '"', "kazma_v2_4_0", "react@18",
    "My favorite ", " is ", "We decided to ", "I have a dog named ", "Max", "\n", "ǅ", "ﬁ",
]
_TEXTS = st.one_of(
    st.text(max_size=2_000),
    st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=20)), max_size=60)
    .map("".join),
    st.builds(lambda s, n: (s * n)[:100_000], st.text(min_size=1, max_size=300),
              st.integers(1, 2_000)),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXTS, speaker=st.text(max_size=20))
def test_extractor_never_raises_and_emits_only_clean_rows(text: str, speaker: str) -> None:
    for cand in extract_heuristic(TurnText(text, speaker, ANCHOR)):
        assert cand.predicate in PREDICATES
        assert check_subject(cand.subject) is None
        assert cand.object and cand.object == cand.object.strip()
        assert cand.source in ("heuristic", "user_explicit")
        assert 0.0 <= cand.confidence <= 1.0
        for when in (cand.valid_from, cand.valid_to):
            assert when is None or when.utcoffset() is not None


# --- rule gates: skipping a rule whose required words are absent changes nothing -----------
@pytest.mark.parametrize(
    ("source", "gate"),
    [
        (r"\bI\s+live\s+in\s+(?P<obj>.+)", {"live"}),
        (r"(?:joined|started\s+at)\s+\w+", {"joined", "started"}),
        (r"(?:my\s+)?brother\s+lives", {"brother"}),  # the optional part is not required
        (r"(?:lives|x)\s+in", set()),  # an alternative without 3 literal characters
        (r"(?:Anna\s+)+works", {"works"}),
    ],
)
def test_required_literals(source: str, gate: set[str]) -> None:
    from memory_core.extraction.lexicon import required_literals

    assert required_literals(source) == gate


def _facts_chat_texts() -> list[str]:
    doc = json.loads((CASES_PATH.parent / "facts_conversations.json").read_text("utf-8"))
    return [text for c in doc["conversations"] for s in c["sessions"] for _, text in s["turns"]]


def test_gates_change_no_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_core.extraction import rules

    texts = [c["text"] for c in _load_cases()] + _facts_chat_texts() + NOTHING
    gated = [extract_heuristic(_turn(t)) for t in texts]
    monkeypatch.setattr(rules, "rules_for", lambda negated, present: (
        rules.NEGATION_RULES if negated else rules.POSITIVE_RULES))
    assert [extract_heuristic(_turn(t)) for t in texts] == gated
    assert sum(map(len, gated)) > 300  # the comparison covers many beliefs


def test_the_gate_index_picks_exactly_the_rules_whose_gate_is_open() -> None:
    from memory_core.extraction import rules
    from memory_core.extraction.lexicon import gate_open
    from memory_core.extraction.text import clauses

    texts = [c["text"] for c in _load_cases()] + _facts_chat_texts() + NOTHING
    texts.append("I moved to Zürich last year and I don't work at Café Nüsse any more.")
    presents = {rules.present_gates(c) for t in texts for c in clauses(t)}
    assert None in presents and len(presents) > 100  # non-ASCII clauses too
    for negated in (False, True):
        table = rules.NEGATION_RULES if negated else rules.POSITIVE_RULES
        for present in presents:
            assert list(rules.rules_for(negated, present)) == [
                r for r in table if gate_open(r.gate, present)]


# --- a change of value said without naming the old one (issue 12, item 1) -------------------
def test_a_bare_title_after_a_new_employer_is_the_new_title() -> None:
    text = "guess what, I'm with Google now for the summer!! software engineering intern"
    assert _triples(text) >= {("@speaker", "works_at", "google"),
                              ("@speaker", "job_title_is", "software engineering intern")}


@pytest.mark.parametrize("text", [
    "Software engineering intern.",  # no employer in the turn: an answer to what?
    "I work at Google. Nurse practitioner, you said?",  # a question, not a title
    "I'm with Google now. The nurse was great",  # a sentence about someone else
])
def test_a_bare_title_without_an_employer_statement_is_nothing(text: str) -> None:
    assert not [c for c in extract_heuristic(_turn(text)) if c.predicate == "job_title_is"]


@pytest.mark.parametrize(("text", "predicate", "obj", "replaces"), [
    ("Yeah, I prefer mild food now, my stomach gave up on Sichuan.", "prefers", "mild food",
     True),
    ("I prefer mild food.", "prefers", "mild food", False),
    ("We're going to Seoul in April now, and maybe Busan.", "plans_to", "go to seoul", True),
    ("We're going to Japan in April, Tokyo and Kyoto.", "plans_to", "go to japan", False),
    ("These days I love jazz music instead.", "likes", "jazz music", True),
])
def test_a_change_marker_makes_a_replacing_statement(text: str, predicate: str, obj: str,
                                                     replaces: bool) -> None:
    [cand] = [c for c in extract_heuristic(_turn(text)) if c.predicate == predicate]
    assert _norm(cand.object) == obj and cand.replaces is replaces and not cand.negated


# --- "a few months ago", "a few times a week": how long ago or how often is not the thing ---
@pytest.mark.parametrize(("text", "predicate", "obj"), [
    ("I moved to Denver a few months ago.", "lives_in", "denver"),
    ("I moved to Denver a couple of months ago.", "lives_in", "denver"),
    ("I visited London a few years ago and loved it.", "visited", "london"),
    ("I visited Paris several years ago.", "visited", "paris"),
    ("I went to Rome many years ago.", "visited", "rome"),
    ("I visited Lisbon some weeks ago.", "visited", "lisbon"),
    ("I love hiking a few times a week.", "likes", "hiking"),
    ("I love swimming twice a week.", "likes", "swimming"),
    ("I love yoga three times a week.", "likes", "yoga"),
    ("I love pottery once a month.", "likes", "pottery"),
    # Written without capitals: the place is read by its own rule, and trimmed the same way.
    ("i moved to denver a few months ago", "lives_in", "denver"),
    ("we moved to mountain view a couple of years ago", "moved_to", "mountain view"),
])
def test_how_long_ago_or_how_often_is_no_part_of_the_object(text: str, predicate: str,
                                                             obj: str) -> None:
    assert _objects(text, predicate) == [obj]


@pytest.mark.parametrize(("text", "predicate", "obj"), [
    ("I'm planning to go to Denver for 4 days, from next Wednesday to Sunday.", "plans_to",
     "go to denver for 4 days"),
    ("I'm planning to do strength training exercises 2 times a week.", "plans_to",
     "do strength training exercises 2 times a week"),
    ("I love the Seven Years War era.", "likes", "seven years war era"),  # a name, not a span
    ("I visited Twin Peaks.", "visited", "twin peaks"),
])
def test_how_long_or_how_often_stays_in_a_plan_and_a_name(text: str, predicate: str,
                                                           obj: str) -> None:
    assert _objects(text, predicate) == [obj]


def _objects(text: str, predicate: str) -> list[str]:
    return [_norm(c.object) for c in extract_heuristic(_turn(text)) if c.predicate == predicate]


@pytest.mark.parametrize(("text", "expected"), [
    # LoCoMo's Jon: "Which cities has Jon visited?" had Rome only in a sentence without its
    # subject.
    ("Still working on my biz. Took a short trip last week to Rome to clear my mind.",
     ["rome"]),
    ("Went to Paris with my sister last spring.", ["paris"]),
    ("Went to the store after.", []),
    ("She went to Rome.", []),
])
def test_a_trip_said_without_its_subject_is_the_speakers(text: str,
                                                          expected: list[str]) -> None:
    assert _objects(text, "visited") == expected


@pytest.mark.parametrize(("text", "predicate", "expected"), [
    # LoCoMo asks "What instruments does Tim play?", "What martial arts has John done?":
    # nothing was drawn for either (no predicate).
    ("Yeah, I play clarinet! Started when I was young.", "plays", ["clarinet"]),
    ("I also play the piano.", "plays", ["piano"]),
    ("I play tennis with my friends every Sunday.", "plays", ["tennis"]),
    ("We play Ticket to Ride every Friday.", "plays", ["ticket to ride"]),
    ("I've been playing a lot of Overwatch lately.", "plays", ["overwatch"]),
    ("I usually play CS:GO with my friends.", "plays", ["cs:go"]),  # a colon in a word
    ("I'm doing kickboxing and it's giving me so much energy.", "practices", ["kickboxing"]),
    ("I'm off to do some taekwondo!", "practices", ["taekwondo"]),
    ("I started doing aerial yoga last month.", "practices", ["aerial yoga"]),
    # Not what is played: with whom, what part, how, or a chess move.
    ("I play with my dog every day.", "plays", []),
    ("I played a big role in the project.", "plays", []),
    ("I've been playing professionally for a year.", "plays", []),
    ("I play Qd1# as the black pieces.", "plays", []),
    ("I'm doing great, thanks!", "practices", []),
])
def test_what_is_played_or_practised(text: str, predicate: str, expected: list[str]) -> None:
    assert _objects(text, predicate) == expected


@pytest.mark.parametrize(("text", "predicate", "expected"), [
    # LoCoMo asks "What books has Tim read?", "What movies have both Joanna and Nate seen?";
    # LongMemEval's users name what they read and watch in most book or film chats. Nothing
    # was drawn (no predicate).
    ('I just finished reading "The Silent Patient" by Alex Michaelides today.', "read",
     ["silent patient"]),
    ('I\'ve already read "The Nightingale" and "The Song of Achilles".', "read",
     ["nightingale", "song of achilles"]),
    ('I\'m reading "Dune" by Frank Herbert.', "read", ["dune"]),
    ("I just finished reading Dune and I loved it.", "read", ["dune"]),
    ('I just finished "The Hating Game" by Sally Thorne.', "read", ["hating game"]),
    ('We watched "Iron Man", "Captain America: The First Avenger", and "The Avengers" back to '
     'back!', "watched", ["iron man", "captain america: the first avenger", "avengers"]),
    ('I\'ve been binge-watching "The Crown" lately.', "watched", ["crown"]),
    ("I just rewatched The Shawshank Redemption.", "watched", ["shawshank redemption"]),
    # Not what was read or watched: a plan, a person, a service, no title, or a title that
    # may be either ("The Last Dance" is a documentary series).
    ('I\'m excited to read "The Poppy War"!', "read", []),
    ('I\'ve been meaning to read "The Fifth Season".', "read", []),
    ("I watched LeBron play last night.", "watched", []),
    ("I watched TV last night.", "watched", []),
    ("I read it a while back.", "read", []),
    ('I just finished "The Last Dance" and loved it.', "read", []),
])
def test_what_is_read_or_watched_when_named(text: str, predicate: str,
                                           expected: list[str]) -> None:
    assert _objects(text, predicate) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # LoCoMo: "How many dogs does Andrew have?": "meet Toby, my puppy" drew nothing.
    ("Hey! So much has changed - meet Toby, my puppy.", ["toby"]),
    ("This is Luna, my new kitten!", ["luna"]),
    ("Meet Sam, my dog walker.", []),
    # Pets said possessively draw nothing (tried: "my turtles", "my four dogs" as has_pet put
    # "Audrey has_pet dogs" among the facts of every question about her dogs; LoCoMo R@10
    # 0.713 -> 0.712, multi-hop 0.451 -> 0.449).
    ("I took my turtles to the beach in Tampa yesterday!", []),
    ("My dog loves the park.", []),
])
def test_a_pet_introduced_by_name(text: str, expected: list[str]) -> None:
    assert _objects(text, "has_pet") == expected


def test_a_title_not_read_is_a_negated_read() -> None:
    drawn = extract_heuristic(_turn('I haven\'t read "To Build a Fire" before. I\'ve never '
                                    'watched "The Wire".'))
    assert {(c.predicate, _norm(c.object), c.negated) for c in drawn} == {
        ("read", "to build a fire", True), ("watched", "wire", True)}


def test_quoted_titles_in_a_comma_list_are_each_a_thing() -> None:
    assert _objects('I love "The Office", "Parks and Recreation" and "Friends".', "likes") == [
        "office", "parks and recreation", "friends"]


@pytest.mark.parametrize(("text", "expected"), [
    # "Tim is learning play the violin" was the fact (the "how to" dropped with its "to").
    ("I'm learning how to play the violin now.", ["to play the violin"]),
    ("I'm learning to cook.", ["to cook"]),
    ("I'm learning German.", ["german"]),
])
def test_learning_to_do_something_keeps_its_to(text: str, expected: list[str]) -> None:
    assert _objects(text, "learning") == expected


@pytest.mark.parametrize(("text", "expected"), [
    # LoCoMo: "plans to remember our camping trip", "plans to make it for my family";
    # LongMemEval: "plans to definitely try to use this starting" (an adverb let "try" by).
    ("I'll always remember our camping trip last year.", []),
    ("I'm going to make it for my family this weekend!", []),
    ("I'll definitely try to use this starting next week.", []),
    ("I'm going to make it to the party on Saturday.", ["make it to the party"]),
])
def test_no_plan_of_remembering_or_of_a_pronoun(text: str, expected: list[str]) -> None:
    assert _objects(text, "plans_to") == expected


# --- two relatives' facts in one sentence -------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("My daughter Zoe is 9 and my son Adam is 6.",
     {("Zoe", "age_is", "9"), ("Adam", "age_is", "6")}),
    ("My daughter Zoe is 9, my son Adam is 6.",
     {("Zoe", "age_is", "9"), ("Adam", "age_is", "6")}),
    ("My sister Ana lives in Boston and my brother Sam lives in Austin.",
     {("Ana", "lives_in", "boston"), ("Sam", "lives_in", "austin")}),
    ("My wife works at KPMG and my son Max is 12.", {("Max", "age_is", "12")}),
])
def test_a_second_relative_in_the_same_sentence_has_facts_too(
        text: str, expected: set[tuple[str, str, str]]) -> None:
    assert expected <= _triples(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("yo. I'm Luis, third year at UCLA, studying computer science",
     {("@speaker", "name_is", "luis"), ("@speaker", "studies_at", "ucla")}),
    ("I'm a sophomore at NYU.", {("@speaker", "studies_at", "nyu")}),
    ("I'm a third-year at Stanford.", {("@speaker", "studies_at", "stanford")}),
])
def test_a_students_year_names_the_school(text: str, expected: set[tuple[str, str, str]]
                                           ) -> None:
    assert expected <= _triples(text)


@pytest.mark.parametrize("text", ["I'm in my third year at Deloitte.", "I'm a senior at Google.",
                                  "I'm in my second year in London."])
def test_a_year_somewhere_else_is_no_school(text: str) -> None:
    assert not [c for c in extract_heuristic(_turn(text)) if c.predicate == "studies_at"]


# --- "here": the place the turn named ----------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("Hola from Mexico City! I moved here two weeks ago.",
     {("@speaker", "lives_in", "mexico city"), ("@speaker", "moved_to", "mexico city")}),
    ("Greetings from Paris! We moved here last month.", {("@speaker", "lives_in", "paris")}),
    ("I'm in Austin now. I moved here for work.", {("@speaker", "lives_in", "austin")}),
    ("My sister lives in Oslo. I moved here too.", {("@speaker", "lives_in", "oslo")}),
])
def test_here_is_the_place_the_turn_named(text: str, expected: set[tuple[str, str, str]]
                                          ) -> None:
    assert expected <= _triples(text)


@pytest.mark.parametrize("text", [
    "I moved here two weeks ago.",  # no place named
    "I visited Rome last year. I moved here in 2019.",  # a visit says nothing of "here"
    "I'm from Boston. I moved here in May.",  # where one comes from is not where one is
])
def test_here_without_a_current_place_is_nothing(text: str) -> None:
    assert not [c for c in extract_heuristic(_turn(text))
                if c.predicate in ("lives_in", "moved_to") and not c.negated]


def test_here_with_its_own_place_is_not_the_earlier_one() -> None:
    got = _triples("My sister lives in Oslo. I live here in Boston.")
    assert ("@speaker", "lives_in", "oslo") not in got


@pytest.mark.parametrize(("text", "expected", "absent"), [
    # LoCoMo: Toby is Andrew's dog, walking with him and his girlfriend.
    ("My girlfriend, Toby and I are going camping.", set(), ("@speaker", "has_partner", "toby")),
    # The same list before a verb that splits clauses ("and I went"): still no name, and
    # what the three did is still the speaker's.
    ("My girlfriend, Toby and I went to Rome.", {("@speaker", "visited", "rome")},
     ("@speaker", "has_partner", "toby")),
    ("My brother, Tom and I moved to Denver.", {("@speaker", "lives_in", "denver")},
     ("@speaker", "has_sibling", "tom")),
    ("Meet my girlfriend, Toby!", {("@speaker", "has_partner", "toby")}, None),
    ("My wife, Sarah, and I went to Rome.", {("@speaker", "married_to", "sarah")}, None),
    ("My wife Sarah and I went to Rome.", {("@speaker", "married_to", "sarah")}, None),
])
def test_a_list_of_three_is_no_name(text: str, expected: set[tuple[str, str, str]],
                                    absent: tuple[str, str, str] | None) -> None:
    got = _triples(text)
    assert expected <= got and absent not in got


# --- a liking that says nothing on its own ------------------------------------------------
@pytest.mark.parametrize("text", [
    "I love it and that'll keep my confidence up.",  # LoCoMo
    "I just like playing for fun!",
    "I really like the idea.",
    "I love the color and texture.",
    "I love their work.",
    "I really love having them around.",
    "I love the smell and taste it adds to dishes.",
    # A clause is no list of things (LoCoMo stored "power you were talking" and "is awesome").
    "I love how it shows the togetherness and power you were talking about.",
    "Being my own boss and doing something I love is awesome.",
    # LoCoMo stored these (session 21): a manner ("the way ..."), the rest of a relative
    # clause, and a clause whose "and" joins what it says.
    "I love the way the frosting turned out!",
    "Connecting with the things I love makes writing even more fun.",
    "I'm really passionate about making sure veterans are supported and valued in our "
    "community.",
])
def test_a_liking_of_an_aspect_a_pronoun_or_a_bare_gerund_is_none(text: str) -> None:
    assert _objects(text, "likes") == []


@pytest.mark.parametrize(("text", "expected"), [
    # "and" after a preposition joins what it governs, not two likings (LoCoMo stored
    # "family" and "mindset" as likings of their own).
    ("I love road trips with friends and family.", ["road trips with friends and family"]),
    ("I love going on road trips with friends and family.",  # too long together: no "family"
     ["going on road trips with friends"]),
    ("I love non-fiction books about personal development and mindset.",
     ["non-fiction books about personal development"]),
    ("I love hiking with my dog and painting.", ["hiking with my dog", "painting"]),
    ("I love cooking and baking.", ["cooking", "baking"]),
    ("I really like the idea and the acting.", ["acting"]),
    ("Max loves playing with his squeaky ball.", ["playing with his squeaky ball"]),
    # Genres before one head noun are kinds of it (LoCoMo: "Nate likes action", "Nate likes
    # fantasy" from "I love action and sci-fi movies"); other words keep their own sense.
    ("I love action and sci-fi movies, the effects are so cool!",
     ["action movies", "sci-fi movies"]),
    ("I like rock and pop music.", ["rock music", "pop music"]),
    ("I love pizza and cheese sticks.", ["pizza", "cheese sticks"]),
    ("I love jazz and board games.", ["jazz", "board games"]),
    # A list with commas is every item (the comma ended the object: "likes horror"), "both"
    # is no part of one (only "pasta" was drawn); a comma adding to an item is no list.
    ("I like horror, comedy and romance films.",
     ["horror films", "comedy films", "romance films"]),
    ("I enjoy reading, watching movies, and exploring nature.",
     ["reading", "watching movies", "exploring nature"]),
    ("I love both pizza and pasta.", ["pizza", "pasta"]),
    ("I love cooking Indian food, especially the rich and creamy curries.",
     ["cooking indian food"]),
    ("I love pizza, but I hate olives.", ["pizza"]),
    # What ends the thing liked: a clause joined by "so" or "and" (LoCoMo stored "share my
    # love with others", "talking about what we're thankful"), an example ("like Bach").
    ("I'm passionate about dance and fashion so combining them lets me share my love with "
     "others.", ["dance", "fashion"]),
    ("We love prepping the feast and talking about what we're thankful for.",
     ["prepping the feast"]),
    ("I love spicy food and shrimp is my favorite protein.", ["spicy food"]),
    ("I'm a fan of both classical like Bach and Mozart.", ["classical", "mozart"]),
    ("I love dance so much.", ["dance"]),
])
def test_what_is_liked_is_a_thing_of_its_own(text: str, expected: list[str]) -> None:
    assert _objects(text, "likes") == expected


@pytest.mark.parametrize(("text", "predicate", "expected"), [
    # LongMemEval's evidence turns said these and drew nothing: "I've bought" (the bought
    # rule read only "I bought"), "did attend three sessions of" (the group was too long
    # an object with its count, and "did attend" no attending).
    ("I've already bought three tops from H&M, I'm loving their summer collection.",
     "bought", ["three tops"]),
    ("We have purchased a house in Denver.", "bought", ["house"]),
    ("I have bought into the idea.", "bought", []),
    ("I've bought a bunch of stuff for the trip.", "bought", []),  # no thing in particular
    ("I did attend three sessions of the bereavement support group.", "attended",
     ["bereavement support group"]),
    ("I attended two meetings of the book club.", "attended", ["book club"]),
    ("I did attend, but left early.", "attended", []),
    # LongMemEval: "bought item", "bought first", "bought online", "kit online".
    ("I'll add a column for the store where I purchased the item.", "bought", []),
    ("I'll try the kit I bought first.", "bought", []),
    ("My new paint, which I purchased online a month ago, is great.", "bought", []),
    ("I bought a new vacuum cleaner online last week.", "bought", ["new vacuum cleaner"]),
])
def test_a_purchase_or_attendance_said_with_have_did_or_a_count(text: str, predicate: str,
                                                              expected: list[str]) -> None:
    assert _objects(text, predicate) == expected


@pytest.mark.parametrize("text", [
    # LoCoMo: "Gina remembers just do it", "... I'm always here for you", "... believe in
    # yourself and your abilities": a "remember" that counsels the listener.
    "Hey Jon! Remember, just do it!",
    "And remember, I'm always here for you.",
    "Don't forget, believe in yourself and your abilities.",
    "Remember, never give up.",
    # "Remember, ..." without the speaker in it: counsel (LongMemEval: "it's all about
    # progress, not perfection", "the key is to start small and be consistent").
    "Remember, it's all about progress, not perfection.",
    "Remember, the key is to be consistent and make it a habit.",
])
def test_advice_to_remember_is_no_memory(text: str) -> None:
    assert _objects(text, "remembers") == []


def test_a_thing_to_remember_is_still_kept() -> None:
    assert _objects("Remember that my sister's birthday is May 3.", "remembers") == [
        "my sister's birthday is may 3"]
    assert _objects("Please remember that the wifi password is hunter2.", "remembers") == [
        "wifi password is hunter2"]
    assert _objects("Remember, I'm allergic to peanuts.", "remembers") == [
        "i'm allergic to peanuts"]


def test_a_clause_led_by_a_gerund_names_no_one() -> None:
    # LoCoMo: "Having likes other dog" (and an entity "Having"): "He" was read as "Having".
    text = "Having a walking buddy for Max will be great. He really likes the other dog too!"
    assert not [c for c in extract_heuristic(_turn(text, speaker="Audrey"))
                if c.subject.lower() == "having"]
    assert ("Theo", "likes", "other dog") in _triples(
        "Theo came over. He really likes the other dog too!")


@pytest.mark.parametrize("text", [
    # LongMemEval: 127 of the 327 likings its users said were approval of what the
    # assistant had just proposed, which "What do I like?" listed beside their tastes.
    "I like the idea of creating a content calendar.",
    "I love the sound of the Chicken Fajitas recipe.",
    "I really like the pasta-making kit idea!",
    "I like the third option.",
    "I love the options you provided.",
    "I like the revised routine you've suggested.",
    "I like the template!",
    "I like the suggested schedule, but I'm not sure.",
    "I like number 2.",
    "I'll try Strava and Runkeeper to see which one I like better.",
])
def test_approval_of_a_proposal_is_no_taste(text: str) -> None:
    assert _objects(text, "likes") == []


def test_a_taste_beside_an_approval_is_kept() -> None:
    assert _objects("I like the variety of recipes you provided, and I love spicy food.",
                    "likes") == ["spicy food"]


# --- a quoted title is one thing ---------------------------------------------------------
@pytest.mark.parametrize(("text", "predicate", "expected"), [
    # The quote ended the object (nothing was drawn, or "plans to watch"), and the colon of
    # "Spider-Man: No Way Home" ended the clause, its "No" made it a negation.
    ('I love "The Office" and "Parks and Recreation".', "likes",
     ["office", "parks and recreation"]),
    ('I really like "Happy" and "Thank U, Next".', "likes", ["happy", "thank u, next"]),
    ('We love "Home Alone" - it always brings lots of laughs!', "likes", ["home alone"]),
    ('My favorite movie is "Spider-Man: No Way Home".', "favorite",
     ["movie: spider-man: no way home"]),
    ('I\'m planning to watch "Spider-Man: No Way Home" next weekend.', "plans_to",
     ["watch spider-man: no way home"]),
    # Too long with its title, the object is what comes before it, as before.
    ('I\'m planning to drive my 2018 Ford Mustang GT to the "Speed Demons" event at the '
     'Willow Springs International Raceway in California.', "plans_to",
     ["drive my 2018 ford mustang gt"]),
])
def test_a_quoted_title_is_one_thing(text: str, predicate: str, expected: list[str]) -> None:
    assert _objects(text, predicate) == expected


def test_quoted_speech_is_no_title() -> None:
    # LongMemEval: a pasted passage's “Rain, rain, go away,” my little sister Stella sang.
    assert _triples("“Rain, rain, go away,” my little sister Stella sang.") == set()
    assert _triples('She was like "I live in London now" and I was shocked.') == set()


# --- a pasted interview is not the speaker talking -----------------------------------------
def test_a_pasted_interview_transcript_is_read_for_nothing() -> None:
    # LongMemEval: a pasted transcript made the user "Dolly" and "Lakshay", from New Delhi.
    pasted = ("Transcript 4: Dana Vo\n\nQ. Hello! Can you introduce yourself?\n\nA. My name's "
              "Dana and I'm from Hanoi. I work as a nurse at City Hospital.")
    assert extract_heuristic(_turn(pasted)) == []
    # A list of options, or one question line above what the user says, is no interview.
    assert _objects("My options:\nA. I live in Boston\nB. I live in Denver", "lives_in") == [
        "boston", "denver"]
    assert _objects("Q: what do you think?\nI live in Denver now.", "lives_in") == ["denver"]
