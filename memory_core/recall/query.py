"""Query safety: validation, cleaning, the FTS5 expression, the digest.

User text never reaches SQL or the FTS5 query language as text. The FTS5 expression is built
only from extracted word tokens, each double-quoted (a quoted string is a literal phrase in
FTS5, so ``AND``, ``NEAR(``, ``*``, ``^`` and column filters mean nothing inside it), joined
with ``OR``; every SQL statement takes it as a bound parameter.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from memory_core.errors import InvalidInputError

_WORD_RE = re.compile(r"\w+")
# Control characters (C0, DEL, C1) except the ordinary whitespace ones, which become spaces.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
MAX_TERMS = 32
MAX_TERM_CHARS = 64

_STOPWORD_TEXT = """
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't
doing don't down during each few for from further had hadn't has hasn't have haven't having he
he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if
in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off on
once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
which while who who's whom why why's with won't would wouldn't you you'd you'll you're you've
your yours yourself yourselves s t d ll m re ve did does do doing done also just will would
ever many much might must shall yet don isn aren wasn weren didn doesn hasn
haven hadn couldn wouldn shouldn won mustn shan
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
_YEAR_RE = re.compile(r"\b(19[5-9]\d|20\d\d)\b")


@dataclass(frozen=True)
class TimeCue:
    """Months (1-12) and years a query names, e.g. "in May 2023"."""

    months: frozenset[int] = frozenset()
    years: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.months or self.years)

    def matches(self, stored_time: str | None) -> float:
        """1.0 when ``stored_time`` (storage text) falls in every named month and year."""
        if not self or not stored_time or len(stored_time) < 7:
            return 0.0
        try:
            year, month = int(stored_time[:4]), int(stored_time[5:7])
        except ValueError:
            return 0.0
        if (self.years and year not in self.years) or (self.months and month not in
                                                       self.months):
            return 0.0
        return 1.0


def time_cue(text: str) -> TimeCue:
    # "may" is a month only next to a year or a day number; otherwise it is a verb.
    words = _WORD_RE.findall(text.casefold())
    months = set()
    for i, w in enumerate(words):
        if w in MONTHS and (w != "may" or any(
                n.isdigit() for n in words[max(0, i - 1):i + 2] if n != w)):
            months.add(MONTHS[w])
    years = {int(y) for y in _YEAR_RE.findall(text)}
    return TimeCue(frozenset(months), frozenset(years))


def names(text: str, candidates: Iterable[str | None]) -> frozenset[str]:
    """The ``candidates`` (speaker names) that ``text`` names, as a whole name or by its
    first word ("Caroline" for "Caroline Smith"); compared case-folded, word by word."""
    words = _WORD_RE.findall(text.casefold())
    joined = " " + " ".join(words) + " "
    out = set()
    for name in dict.fromkeys(c for c in candidates if c):
        parts = _WORD_RE.findall(name.casefold())
        if not parts or parts[0] in STOPWORDS:
            continue
        if f" {' '.join(parts)} " in joined or f" {parts[0]} " in joined:
            out.add(name)
    return frozenset(out)


@dataclass(frozen=True)
class PreparedQuery:
    """A validated query: its cleaned text (for embedding), its terms and FTS5 expression."""

    text: str
    terms: tuple[str, ...]
    fts: str | None  # None: nothing to search by keyword
    digest: str
    time: TimeCue = TimeCue()


def clean_text(query: str) -> str:
    """NFC-normalised text without control characters, whitespace collapsed."""
    text = unicodedata.normalize("NFC", query)
    text = _CONTROL_RE.sub(" ", text)
    # Lone surrogates cannot be encoded for SQLite or the embedder; drop them.
    text = text.encode("utf-8", "ignore").decode("utf-8")
    return " ".join(text.split())


def query_terms(text: str) -> tuple[str, ...]:
    """Case-folded word tokens without stopwords, first occurrence order, at most 32."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(text.casefold()):
        word = word.strip("_")
        if not word or word in STOPWORDS or len(word) > MAX_TERM_CHARS:
            continue
        seen.setdefault(word, None)
        if len(seen) >= MAX_TERMS:
            break
    return tuple(seen)


def fts_expression(terms: tuple[str, ...]) -> str | None:
    """``"a" OR "b"``; a term is ``\\w+`` so it holds no quote, but quotes are doubled anyway."""
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def digest(query: str) -> str:
    """sha256 of the query as received: what the recall log keeps instead of the query."""
    return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()


def prepare_query(query: object, *, max_chars: int) -> PreparedQuery:
    """Validate and prepare ``query``.

    Raises:
        InvalidInputError: ``query`` is not a ``str``, or longer than ``max_chars``
            (MNEMO_MAX_QUERY_CHARS). Nothing else is refused: any other text is searched.
    """
    if not isinstance(query, str):
        raise InvalidInputError(
            f"recall query must be a str, not {type(query).__name__}: pass the user's text"
        )
    if len(query) > max_chars:
        raise InvalidInputError(
            f"recall query is {len(query)} characters, over the limit of {max_chars} "
            "(MNEMO_MAX_QUERY_CHARS): shorten it or raise the limit"
        )
    text = clean_text(query)
    terms = query_terms(text)
    return PreparedQuery(text=text, terms=terms, fts=fts_expression(terms), digest=digest(query),
                         time=time_cue(text))
