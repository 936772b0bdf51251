"""Relative date phrases resolved to UTC ``[start, end)`` intervals against an anchor time.

Pure and table-driven. The anchor is the turn's time; calendar arithmetic happens in the
anchor's own time zone (so "yesterday" means the speaker's yesterday), results are UTC.

Conventions (best effort; conversation is ambiguous and these are the documented choices):

- weeks start on Monday; "last week" is the previous Monday-to-Monday week;
- a weekend is Saturday 00:00 to Monday 00:00 of its week; "the weekend" without a
  qualifier is the one in progress, else the previous one (``prefer="future"``: the next);
- "last Friday" is the latest Friday strictly before the anchor's day, "next Friday" the
  first one strictly after it, "this Friday" the one in the anchor's week; a bare "Friday"
  follows ``prefer``;
- "N days ago" is that day; "N weeks ago" the week containing the day 7N days back;
  "N months ago" / "N years ago" the calendar month / year N back; "in N ..." mirrors them;
- seasons are meteorological, northern hemisphere (spring = March to May, summer = June to
  August, autumn/fall = September to November, winter = December to February); "last
  summer" is the latest summer already over;
- a day or month without a year ("on 5 May", "in May") is the latest one that has started
  (``prefer="past"``, the default) or the next one not yet over (``prefer="future"``);
- "the week before" / "the day after" are taken relative to the anchor (no other event is
  known here): "the week before" is last week, "the week before last" two weeks back;
- vague phrases ("recently", "a few days ago", "the other day") resolve to None.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Literal

from memory_core.errors import InvalidInputError
from memory_core.extraction.lexicon import GateScan, gate_open, required_literals

Interval = tuple[datetime, datetime]
Prefer = Literal["past", "future"]
_Span = tuple[date, date]  # [first day, day after the last)
_Handler = Callable[[re.Match[str], date, Prefer], "_Span | None"]

MAX_PHRASE_CHARS = 80
MAX_SCAN_CHARS = 10_000

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTHS = {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}
_MONTHS.update({n[:3]: i + 1 for i, n in enumerate(_MONTH_NAMES)} | {"sept": 9})
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "couple of": 2,
}  # fmt: skip
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

_WD = "|".join(_WEEKDAYS)
_MONTH_FULL = "|".join(_MONTH_NAMES)
_MONTH_ANY = "|".join([*_MONTH_NAMES, "sept", "jan", "feb", "mar", "apr", "jun", "jul",
                       "aug", "sep", "oct", "nov", "dec"])  # fmt: skip
_NUM = "|".join(w.replace(" ", r"\s+") for w in sorted(_NUMBER_WORDS, key=len, reverse=True))
_NUM = rf"(?P<n>\d{{1,3}}|{_NUM})"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PREP = r"(?:(?:on|in|at|during|over|by|since|until|till|from|before|after|around|back\s+in)\s+)?"
_REL = r"(?P<rel>last|this|next|past|coming|this\s+past|this\s+coming|the\s+past|the\s+coming|the\s+previous|the\s+following)"  # noqa: E501
_REL_SHIFT = {
    "last": -1, "past": -1, "this past": -1, "the past": -1, "the previous": -1,
    "this": 0, "next": 1, "coming": 1, "this coming": 1, "the coming": 1, "the following": 1,
}  # fmt: skip
_DAY_WORDS = {
    "day before yesterday": -2, "day after tomorrow": 2, "yesterday": -1, "last night": -1,
    "today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
    "earlier today": 0, "later today": 0, "tomorrow": 1, "day before": -1, "day after": 1,
}  # fmt: skip


@dataclass(frozen=True)
class DatePhrase:
    """A date phrase found in a text: its surface form and character span."""

    text: str
    start: int
    end: int


def _norm(text: str) -> str:
    return " ".join(text.casefold().replace("’", "'").split())


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    idx = year * 12 + month - 1 + n
    return idx // 12, idx % 12 + 1


def _month_span(year: int, month: int) -> _Span:
    ny, nm = _add_months(year, month, 1)
    return date(year, month, 1), date(ny, nm, 1)


def _day_span(d: date) -> _Span:
    return d, d + timedelta(days=1)


def _week_span(d: date) -> _Span:
    start = _monday(d)
    return start, start + timedelta(days=7)


def _shift(today: date, unit: str, n: int) -> _Span:
    if unit == "day":
        return _day_span(today + timedelta(days=n))
    if unit == "week":
        return _week_span(today + timedelta(days=7 * n))
    if unit == "month":
        return _month_span(*_add_months(today.year, today.month, n))
    return date(today.year + n, 1, 1), date(today.year + n + 1, 1, 1)


def _number(m: re.Match[str]) -> int:
    raw = _norm(m.group("n"))
    return int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]


def _pick(spans: list[_Span], today: date, prefer: Prefer) -> _Span | None:
    """Latest span already started (past) or earliest span not yet over (future)."""
    if prefer == "past":
        started = [s for s in spans if s[0] <= today]
        return max(started) if started else None
    pending = [s for s in spans if s[1] > today]
    return min(pending) if pending else None


def _h_day_word(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    word = _norm(m.group("word")).removeprefix("the ")
    return _day_span(today + timedelta(days=_DAY_WORDS[word]))


def _h_period(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    return _shift(today, m.group("unit").lower(), _REL_SHIFT[_norm(m.group("rel"))])


def _h_period_before(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    shifts = {"before last": -2, "before": -1, "after": 1, "after next": 2}
    return _shift(today, m.group("unit").lower(), shifts[_norm(m.group("rel"))])


def _h_weekend(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    rel = _norm(m.group("rel") or "")
    if rel in ("coming", "this coming", "the coming"):
        week = _monday(today) + timedelta(days=7 if today.weekday() >= 5 else 0)
    elif rel in _REL_SHIFT:
        week = _monday(today) + timedelta(days=7 * _REL_SHIFT[rel])
    elif today.weekday() >= 5:
        week = _monday(today)
    else:
        week = _monday(today) + timedelta(days=-7 if prefer == "past" else 0)
    return week + timedelta(days=5), week + timedelta(days=7)


def _h_weekday(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    target = _WEEKDAYS.index(m.group("wd").lower())
    rel = _norm(m.group("rel") or "")
    if rel == "this":
        return _day_span(_monday(today) + timedelta(days=target))
    shift = _REL_SHIFT.get(rel, -1 if prefer == "past" else 1)
    if shift < 0:
        back = (today.weekday() - target) % 7 or 7
        return _day_span(today - timedelta(days=back))
    ahead = (target - today.weekday()) % 7 or 7
    return _day_span(today + timedelta(days=ahead))


def _h_ago(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    return _shift(today, m.group("unit").lower(), -_number(m))


def _h_ahead(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    return _shift(today, m.group("unit").lower(), _number(m))


def _season_span(season: str, year: int) -> _Span:
    start = date(year, _SEASON_START[season], 1)
    return start, date(*_add_months(start.year, start.month, 3), 1)


def _h_season(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    season = m.group("season").lower()
    if m.group("year"):
        return _season_span(season, int(m.group("year")))
    spans = [_season_span(season, y) for y in range(today.year - 2, today.year + 2)]
    rel = _norm(m.group("rel") or "")
    if rel == "this":
        year = today.year - 1 if season == "winter" and today.month <= 2 else today.year
        return _season_span(season, year)
    shift = _REL_SHIFT.get(rel)
    if shift is not None and shift < 0:
        return max(s for s in spans if s[1] <= today)
    if shift is not None and shift > 0:
        return min(s for s in spans if s[0] > today)
    return _pick(spans, today, prefer)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _h_day_month(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    month, day = _MONTHS[m.group("month").lower()], int(m.group("day"))
    if m.group("year"):
        d = _safe_date(int(m.group("year")), month, day)
        return _day_span(d) if d else None
    days = [_safe_date(y, month, day) for y in range(today.year - 1, today.year + 2)]
    return _pick([_day_span(d) for d in days if d], today, prefer)


def _h_month_year(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    return _month_span(int(m.group("year")), _MONTHS[m.group("month").lower()])


def _h_month(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    month = _MONTHS[m.group("month").lower()]
    rel = _norm(m.group("rel") or "")
    if rel in ("this", "earlier this", "later this"):
        return _month_span(today.year, month)
    spans = [_month_span(y, month) for y in range(today.year - 1, today.year + 2)]
    current = _month_span(today.year, today.month)
    if rel in ("last", "past"):
        return max(s for s in spans if s[1] <= current[0])
    if rel in ("next", "coming"):
        return min(s for s in spans if s[0] >= current[1])
    return _pick(spans, today, prefer)


def _h_year(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    year = int(m.group("year"))
    return date(year, 1, 1), date(year + 1, 1, 1)


def _h_iso(m: re.Match[str], today: date, prefer: Prefer) -> _Span | None:
    d = _safe_date(int(m.group("year")), int(m.group("mm")), int(m.group("dd")))
    return _day_span(d) if d else None


@dataclass(frozen=True)
class _Rule:
    """A date rule; its regexes compile on first use (importing the extractor stays cheap)."""

    full_src: str  # what resolve_relative accepts (after an optional preposition)
    find_src: str  # what find_date_phrases accepts inside running text
    handler: _Handler

    @functools.cached_property
    def full(self) -> re.Pattern[str]:
        return re.compile(self.full_src, re.IGNORECASE)

    @functools.cached_property
    def find(self) -> re.Pattern[str]:
        return re.compile(self.find_src, re.IGNORECASE)

    @functools.cached_property
    def find_gate(self) -> frozenset[str]:
        return required_literals(self.find_src)


def _rule(full: str, handler: _Handler, find: str | None = None) -> _Rule:
    find_src = find if find is not None else _PREP + f"(?:{full})"
    return _Rule(
        full_src=_PREP + f"(?:{full})",
        find_src=rf"(?<![\w@/.-])(?:{find_src})(?![\w@/-])",
        handler=handler,
    )


_DAY_WORD_RE = (
    r"(?P<word>(?:the\s+)?day\s+(?:before\s+yesterday|after\s+tomorrow)|yesterday|last\s+night"
    r"|today|tonight|tomorrow|this\s+(?:morning|afternoon|evening)|(?:earlier|later)\s+today"
    r"|the\s+day\s+(?:before|after))(?:\s+(?:morning|afternoon|evening|night))?"
)
_SEASON_RE = rf"(?:(?:{_REL}|the)\s+)?(?P<season>spring|summer|autumn|fall|winter)"
_MONTH_REL = r"(?P<rel>last|this|next|past|coming|early|late|mid|earlier\s+this|later\s+this)"
_DAY_N = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"

_RULES: tuple[_Rule, ...] = (
    _rule(_DAY_WORD_RE, _h_day_word),
    _rule(rf"(?:(?:earlier|later)\s+)?{_REL}\s+(?P<unit>week|month|year)", _h_period),
    _rule(
        r"the\s+(?P<unit>week|month|year)\s+(?P<rel>before\s+last|after\s+next|before|after)",
        _h_period_before,
    ),
    _rule(rf"(?:(?:{_REL}|the)\s+)?weekend", _h_weekend, find=rf"(?:over\s+|on\s+)?(?:(?:{_REL}|the)\s+)weekend"),  # noqa: E501
    _rule(
        rf"(?:{_REL}\s+)?(?P<wd>{_WD})(?:\s+(?:morning|afternoon|evening|night))?",
        _h_weekday,
        find=rf"(?=(?:on|by|until|till|before|after|since|from|last|this|next|past|coming)\s)"
        rf"(?:(?:on|by|until|till|before|after|since|from)\s+)?(?:{_REL}\s+)?"
        rf"(?P<wd>{_WD})(?:\s+(?:morning|afternoon|evening|night))?",
    ),
    _rule(rf"{_NUM}\s+(?P<unit>day|week|month|year)s?\s+ago", _h_ago),
    _rule(rf"in\s+{_NUM}\s+(?P<unit>day|week|month|year)s?", _h_ahead),
    _rule(rf"{_NUM}\s+(?P<unit>day|week|month|year)s?\s+from\s+now", _h_ahead),
    _rule(
        rf"{_SEASON_RE}(?:\s+(?:of\s+)?{_YEAR})?",
        _h_season,
        find=rf"(?:in\s+|during\s+|over\s+)?(?:(?:{_REL}|the)\s+(?P<season>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?{_YEAR})?"
        rf"|(?P<season2>spring|summer|autumn|fall|winter)\s+(?:of\s+)?{_YEAR.replace('<year>', '<year2>')})",  # noqa: E501
    ),
    _rule(r"(?P<year>\d{4})-(?P<mm>\d{2})-(?P<dd>\d{2})", _h_iso),
    _rule(
        rf"(?:the\s+)?{_DAY_N}\s+(?:of\s+)?(?P<month>{_MONTH_ANY})\.?(?:,?\s+{_YEAR})?",
        _h_day_month,
    ),
    _rule(
        rf"(?P<month>{_MONTH_ANY})\.?\s+(?:the\s+)?{_DAY_N}(?![\d:])(?:,?\s+{_YEAR})?", _h_day_month
    ),
    _rule(rf"(?:(?:early|late|mid)[\s-]+)?(?P<month>{_MONTH_ANY})\.?,?\s+(?:of\s+)?{_YEAR}", _h_month_year),  # noqa: E501
    _rule(
        rf"(?:{_MONTH_REL}\s+)?(?P<month>{_MONTH_FULL})",
        _h_month,
        find=rf"(?=(?:in|during|since|until|by|before|after|last|this|next|past|coming|early|late"
        rf"|mid|earlier|later)\s)(?:(?:in|during|since|until|by|before|after)\s+)?"
        rf"(?:{_MONTH_REL}\s+)?"
        rf"(?P<month>{_MONTH_FULL})",
    ),
    _rule(
        rf"(?:(?:early|late|mid)[\s-]+)?{_YEAR}",
        _h_year,
        find=rf"(?:in|since|during|back\s+in|until|by|before|after)\s+(?:(?:early|late|mid)[\s-]+)?"
        rf"{_YEAR}",
    ),
)


def _require_aware(anchor: datetime) -> tzinfo:
    if not isinstance(anchor, datetime) or anchor.tzinfo is None or anchor.utcoffset() is None:
        raise InvalidInputError(
            f"anchor {anchor!r} must be a timezone-aware datetime: "
            "pass e.g. datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)"
        )
    return anchor.tzinfo


def _to_utc(span: _Span, tz: tzinfo) -> Interval:
    start = datetime.combine(span[0], time(), tzinfo=tz).astimezone(UTC)
    end = datetime.combine(span[1], time(), tzinfo=tz).astimezone(UTC)
    return start, end


def _apply(rule: _Rule, m: re.Match[str], anchor: datetime, prefer: Prefer) -> Interval | None:
    try:
        span = rule.handler(m, anchor.date(), prefer)
        return _to_utc(span, anchor.tzinfo) if span else None  # type: ignore[arg-type]
    except (ValueError, OverflowError):
        return None  # outside the calendar: "999 years ago", "next year" in 9999


def resolve_relative(
    phrase: str, anchor: datetime, *, prefer: Prefer = "past"
) -> Interval | None:
    """The UTC ``[start, end)`` interval ``phrase`` denotes as seen at ``anchor``, or None.

    ``phrase`` is one date expression ("last Friday", "on 5 May", "3 weeks ago", "in 2022"),
    optionally led by a preposition. ``anchor`` must be timezone-aware (InvalidInputError
    otherwise). ``prefer`` settles phrases that could be past or future ("Friday", "in May").
    """
    _require_aware(anchor)
    if prefer not in ("past", "future"):
        raise InvalidInputError(f"prefer={prefer!r} is not valid: use 'past' or 'future'")
    if not isinstance(phrase, str) or len(phrase) > MAX_PHRASE_CHARS:
        return None
    text = _norm(phrase).strip(" .,!?;:")
    for rule in _RULES:
        m = rule.full.fullmatch(text)
        if m:
            return _apply(rule, m, anchor, prefer)
    return None


@functools.cache
def _gate_scan() -> GateScan:
    return GateScan(r.find_gate for r in _RULES)


def find_date_phrases(text: str) -> list[DatePhrase]:
    """Date phrases inside running text, left to right, non-overlapping (longest wins).

    Matching is stricter than ``resolve_relative``: a bare weekday, month, season or year
    needs a cue ("on Friday", "in May", "last summer", "in 2022") so that "I hate Mondays"
    or "I may go" are not dates. Only the first ``MAX_SCAN_CHARS`` characters are scanned.
    """
    if not isinstance(text, str):
        return []
    text = text[:MAX_SCAN_CHARS]
    present = _gate_scan().present(text.lower()) if text.isascii() else None
    found = [(m.start(), -m.end()) for r in _RULES
             if gate_open(r.find_gate, present)
             for m in r.find.finditer(text)]
    result: list[DatePhrase] = []
    for start, neg_end in sorted(found):
        end = -neg_end
        if result and start < result[-1].end:
            continue
        result.append(DatePhrase(text[start:end], start, end))
    return result


def resolve_in_text(
    text: str, anchor: datetime, *, prefer: Prefer = "past"
) -> tuple[DatePhrase, Interval] | None:
    """The first date phrase in ``text`` that resolves, with its interval, or None."""
    for found in find_date_phrases(text):
        interval = resolve_relative(found.text, anchor, prefer=prefer)
        if interval is not None:
            return found, interval
    return None
