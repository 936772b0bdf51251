"""Relative date resolution: table-driven against fixed anchors."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidInputError
from memory_core.extraction.dates import find_date_phrases, resolve_in_text, resolve_relative

MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SATURDAY = datetime(2023, 7, 15, 9, 30, tzinfo=UTC)
WEDNESDAY_JAN = datetime(2024, 1, 10, 18, 0, tzinfo=UTC)


def _days(phrase: str, anchor: datetime = MONDAY, **kw: str) -> tuple[date, date] | None:
    interval = resolve_relative(phrase, anchor, **kw)  # type: ignore[arg-type]
    return (interval[0].date(), interval[1].date()) if interval else None


def d(y: int, m: int, day: int) -> date:
    return date(y, m, day)


# (phrase, anchor, expected [first day, day after the last])
TABLE = [
    ("yesterday", MONDAY, (d(2023, 5, 7), d(2023, 5, 8))),
    ("today", MONDAY, (d(2023, 5, 8), d(2023, 5, 9))),
    ("tonight", MONDAY, (d(2023, 5, 8), d(2023, 5, 9))),
    ("tomorrow", MONDAY, (d(2023, 5, 9), d(2023, 5, 10))),
    ("last night", MONDAY, (d(2023, 5, 7), d(2023, 5, 8))),
    ("the day before yesterday", MONDAY, (d(2023, 5, 6), d(2023, 5, 7))),
    ("the day after tomorrow", MONDAY, (d(2023, 5, 10), d(2023, 5, 11))),
    ("last week", MONDAY, (d(2023, 5, 1), d(2023, 5, 8))),
    ("this week", MONDAY, (d(2023, 5, 8), d(2023, 5, 15))),
    ("next week", MONDAY, (d(2023, 5, 15), d(2023, 5, 22))),
    ("the week before", MONDAY, (d(2023, 5, 1), d(2023, 5, 8))),
    ("the week before last", MONDAY, (d(2023, 4, 24), d(2023, 5, 1))),
    ("the week after", MONDAY, (d(2023, 5, 15), d(2023, 5, 22))),
    ("next Friday", MONDAY, (d(2023, 5, 12), d(2023, 5, 13))),
    ("last Friday", MONDAY, (d(2023, 5, 5), d(2023, 5, 6))),
    ("this Friday", MONDAY, (d(2023, 5, 12), d(2023, 5, 13))),
    ("on Friday", MONDAY, (d(2023, 5, 5), d(2023, 5, 6))),
    ("last Monday", MONDAY, (d(2023, 5, 1), d(2023, 5, 2))),
    ("next Monday", MONDAY, (d(2023, 5, 15), d(2023, 5, 16))),
    ("this weekend", MONDAY, (d(2023, 5, 13), d(2023, 5, 15))),
    ("last weekend", MONDAY, (d(2023, 5, 6), d(2023, 5, 8))),
    ("over the weekend", MONDAY, (d(2023, 5, 6), d(2023, 5, 8))),
    ("this weekend", SATURDAY, (d(2023, 7, 15), d(2023, 7, 17))),
    ("this coming weekend", SATURDAY, (d(2023, 7, 22), d(2023, 7, 24))),
    ("next weekend", MONDAY, (d(2023, 5, 20), d(2023, 5, 22))),
    ("last month", MONDAY, (d(2023, 4, 1), d(2023, 5, 1))),
    ("next month", MONDAY, (d(2023, 6, 1), d(2023, 7, 1))),
    ("last month", WEDNESDAY_JAN, (d(2023, 12, 1), d(2024, 1, 1))),
    ("last year", MONDAY, (d(2022, 1, 1), d(2023, 1, 1))),
    ("this year", MONDAY, (d(2023, 1, 1), d(2024, 1, 1))),
    ("next year", MONDAY, (d(2024, 1, 1), d(2025, 1, 1))),
    ("two days ago", MONDAY, (d(2023, 5, 6), d(2023, 5, 7))),
    ("3 weeks ago", MONDAY, (d(2023, 4, 17), d(2023, 4, 24))),
    ("a week ago", MONDAY, (d(2023, 5, 1), d(2023, 5, 8))),
    ("a couple of weeks ago", MONDAY, (d(2023, 4, 24), d(2023, 5, 1))),
    ("two months ago", MONDAY, (d(2023, 3, 1), d(2023, 4, 1))),
    ("5 years ago", MONDAY, (d(2018, 1, 1), d(2019, 1, 1))),
    ("in 2 days", MONDAY, (d(2023, 5, 10), d(2023, 5, 11))),
    ("in a week", MONDAY, (d(2023, 5, 15), d(2023, 5, 22))),
    ("in three months", MONDAY, (d(2023, 8, 1), d(2023, 9, 1))),
    ("two weeks from now", MONDAY, (d(2023, 5, 22), d(2023, 5, 29))),
    ("last summer", MONDAY, (d(2022, 6, 1), d(2022, 9, 1))),
    ("last summer", datetime(2023, 10, 2, tzinfo=UTC), (d(2023, 6, 1), d(2023, 9, 1))),
    ("this summer", MONDAY, (d(2023, 6, 1), d(2023, 9, 1))),
    ("next spring", MONDAY, (d(2024, 3, 1), d(2024, 6, 1))),
    ("last winter", MONDAY, (d(2022, 12, 1), d(2023, 3, 1))),
    ("this winter", WEDNESDAY_JAN, (d(2023, 12, 1), d(2024, 3, 1))),
    ("summer of 2019", MONDAY, (d(2019, 6, 1), d(2019, 9, 1))),
    ("on 5 May", MONDAY, (d(2023, 5, 5), d(2023, 5, 6))),
    ("the 5th of May", MONDAY, (d(2023, 5, 5), d(2023, 5, 6))),
    ("May 5th, 2021", MONDAY, (d(2021, 5, 5), d(2021, 5, 6))),
    ("June 1", MONDAY, (d(2022, 6, 1), d(2022, 6, 2))),
    ("Dec 24", MONDAY, (d(2022, 12, 24), d(2022, 12, 25))),
    ("May 2023", MONDAY, (d(2023, 5, 1), d(2023, 6, 1))),
    ("in March 2020", MONDAY, (d(2020, 3, 1), d(2020, 4, 1))),
    ("in May", MONDAY, (d(2023, 5, 1), d(2023, 6, 1))),
    ("in August", MONDAY, (d(2022, 8, 1), d(2022, 9, 1))),
    ("last May", MONDAY, (d(2022, 5, 1), d(2022, 6, 1))),
    ("next May", MONDAY, (d(2024, 5, 1), d(2024, 6, 1))),
    ("in 2022", MONDAY, (d(2022, 1, 1), d(2023, 1, 1))),
    ("since 2019", MONDAY, (d(2019, 1, 1), d(2020, 1, 1))),
    ("early 2020", MONDAY, (d(2020, 1, 1), d(2021, 1, 1))),
    ("2023-01-02", MONDAY, (d(2023, 1, 2), d(2023, 1, 3))),
    ("  Yesterday. ", MONDAY, (d(2023, 5, 7), d(2023, 5, 8))),
    ("LAST WEEK", MONDAY, (d(2023, 5, 1), d(2023, 5, 8))),
]


@pytest.mark.parametrize(("phrase", "anchor", "expected"), TABLE, ids=[r[0] for r in TABLE])
def test_resolve_relative(phrase: str, anchor: datetime, expected: tuple[date, date]) -> None:
    assert _days(phrase, anchor) == expected


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("Friday", (d(2023, 5, 12), d(2023, 5, 13))),
        ("on 5 June", (d(2023, 6, 5), d(2023, 6, 6))),
        ("June 1", (d(2023, 6, 1), d(2023, 6, 2))),
        ("in August", (d(2023, 8, 1), d(2023, 9, 1))),
        ("the weekend", (d(2023, 5, 13), d(2023, 5, 15))),
        ("summer", (d(2023, 6, 1), d(2023, 9, 1))),
    ],
)
def test_prefer_future_picks_the_next_occurrence(phrase: str, expected: tuple[date, date]) -> None:
    assert _days(phrase, MONDAY, prefer="future") == expected


@pytest.mark.parametrize(
    "phrase",
    ["recently", "a few days ago", "the other day", "soon", "", "banana", "30 February",
     "2023-02-30", "next time", "someday", "x" * 500, "last\x00week"],
)  # fmt: skip
def test_vague_or_invalid_phrases_resolve_to_none(phrase: str) -> None:
    assert resolve_relative(phrase, MONDAY) is None


def test_intervals_are_utc_and_well_formed() -> None:
    for phrase, anchor, _ in TABLE:
        start, end = resolve_relative(phrase, anchor)  # type: ignore[misc]
        assert start.tzinfo is UTC and end.tzinfo is UTC and start < end


def test_calendar_days_are_the_anchor_zone_days() -> None:
    # 00:30 on Monday in Berlin is still Sunday in UTC; "yesterday" is the Berlin Sunday.
    anchor = datetime(2023, 5, 8, 0, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    start, end = resolve_relative("yesterday", anchor)  # type: ignore[misc]
    assert start == datetime(2023, 5, 6, 22, 0, tzinfo=UTC)
    assert end == datetime(2023, 5, 7, 22, 0, tzinfo=UTC)
    fixed = datetime(2023, 5, 8, 1, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert resolve_relative("today", fixed)[0] == datetime(2023, 5, 8, 5, 0, tzinfo=UTC)  # type: ignore[index]


def test_naive_anchor_is_refused_with_the_fix() -> None:
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        resolve_relative("yesterday", datetime(2023, 5, 8, 13, 56))


def test_bad_prefer_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="past"):
        resolve_relative("Friday", MONDAY, prefer="sideways")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I moved to Boston last year with my wife", ["last year"]),
        ("we met on Friday and again next Tuesday", ["on Friday", "next Tuesday"]),
        ("I'm going to Paris in 2 days", ["in 2 days"]),
        ("graduated in May 2023, started in June", ["in May 2023", "in June"]),
        ("the day before yesterday", ["the day before yesterday"]),
        ("I hate Mondays", []),
        ("I may go, who knows", []),
        ("I love summer", []),
        ("I have 2022 reasons", []),
        ("version 2.4.0 shipped", []),
        ("report due by Friday", ["by Friday"]),
        ("renew it before August", ["before August"]),
    ],
)
def test_find_date_phrases(text: str, found: list[str]) -> None:
    phrases = find_date_phrases(text)
    assert [p.text for p in phrases] == found
    for p in phrases:
        assert text[p.start : p.end] == p.text


def test_resolve_in_text_returns_the_first_resolvable_phrase() -> None:
    hit = resolve_in_text("I adopted Luna two weeks ago, on a Sunday", MONDAY)
    assert hit is not None
    phrase, (start, _end) = hit
    assert phrase.text == "two weeks ago" and start.date() == d(2023, 4, 24)
    assert resolve_in_text("nothing here", MONDAY) is None


@settings(max_examples=300, deadline=None)
@given(
    phrase=st.text(max_size=120),
    anchor=st.datetimes(min_value=datetime(1905, 1, 1), max_value=datetime(2095, 1, 1),
                        timezones=st.just(UTC)),
)  # fmt: skip
def test_resolution_never_raises(phrase: str, anchor: datetime) -> None:
    interval = resolve_relative(phrase, anchor)
    assert interval is None or interval[0] < interval[1]
    spans = find_date_phrases(phrase)
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))


@settings(max_examples=100, deadline=None)
@given(
    phrase=st.sampled_from([row[0] for row in TABLE]),
    anchor=st.datetimes(min_value=datetime(1905, 1, 1), max_value=datetime(2095, 1, 1),
                        timezones=st.just(UTC)),
)  # fmt: skip
def test_known_phrases_resolve_at_any_anchor(phrase: str, anchor: datetime) -> None:
    assert resolve_relative(phrase, anchor) is not None
