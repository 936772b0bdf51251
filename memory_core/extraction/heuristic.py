"""Belief extraction from one turn: the extractor interface and the rule-based extractor.

An ``Extractor`` turns a ``TurnText`` into ``CandidateBelief`` rows; the writer decides what
to store. ``extract_heuristic`` is precise rather than complete: it reads declarative
first-person clauses (and a few third-party ones that start with a name) and skips
questions, hypotheticals, reported speech, quoted speech, code and pasted interview
transcripts. Negated clauses only
feed the negation rules ("I no longer live in X" -> ``lives_in X`` with ``negated=True``).

Pipeline: truncate -> drop code -> sentences -> explicit prefix ("remember that ...") ->
clauses -> gates -> rules (``memory_core.extraction.rules``) -> object cleaning -> dates
(``memory_core.extraction.dates``, against the turn time) -> hygiene -> de-duplication.
Runtime is linear in the input: at most ``MAX_TEXT_CHARS`` are read, sentences longer than
``MAX_SENTENCE_CHARS`` are split at commas or skipped, and every regex is bounded.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from memory_core.errors import InvalidInputError
from memory_core.extraction import rules
from memory_core.extraction.dates import (
    DatePhrase,
    Prefer,
    find_date_phrases,
    resolve_relative,
)
from memory_core.extraction.lexicon import (
    JOB,
    NAME_BODY,
    NUMBER_WORDS,
    REL_ADJS,
    REL_GENDER,
    SPEECH_WORDS,
    VERB_LEMMA,
    LazyRegex,
    alt,
    rel_label,
)
from memory_core.extraction.text import (
    MAX_TEXT_CHARS,
    clauses,
    clean_lower_place,
    clean_name,
    clean_object,
    clean_remembered,
    without_titles,
)
from memory_core.extraction.text import sentences as split_sentences
from memory_core.model.belief_rules import REPLACEABLE
from memory_core.model.hygiene import (
    ASSISTANT,
    SELF_LABELS,
    SPEAKER,
    check_subject,
    normalize_label,
    speaker_role,
)
from memory_core.model.predicates import PREDICATES, RELATION_OF

Source = Literal["heuristic", "user_explicit"]

EXPLICIT_CONFIDENCE = 0.95
REMEMBER_CONFIDENCE = 0.9


@dataclass(frozen=True)
class TurnText:
    """What an extractor sees of a turn."""

    text: str
    speaker: str  # display name of the speaker, e.g. "user", "Caroline"
    occurred_at: datetime  # tz-aware UTC


@dataclass(frozen=True)
class CandidateBelief:
    """A belief proposed by an extractor; the writer validates, anchors and stores it.

    ``subject`` is ``"@speaker"`` for first-person statements, otherwise a surface name.
    ``valid_from`` None means "from the turn time" (the caller applies it). For negated
    candidates ``valid_to`` is when the fact stopped holding (None: at the turn time).
    """

    subject: str
    predicate: str
    object: str
    source: Source
    confidence: float
    valid_from: datetime | None
    valid_to: datetime | None
    negated: bool = False
    # A change said without the old value ("I prefer mild food now"): it ends the older
    # values of its topic (``belief_rules.replaces_topic``).
    replaces: bool = False


Extractor = Callable[[TurnText], list[CandidateBelief]]

_EXPLICIT = LazyRegex(
    r"^(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:(?:I\s+want|I['’]d\s+like)\s+you\s+"
    r"to\s+)?(?:remember|note|make\s+a\s+note|take\s+note|note\s+to\s+self|don['’]?t\s+forget|"
    r"do\s+not\s+forget|keep\s+in\s+mind|for\s+future\s+reference|for\s+the\s+record)"
    r"(?!\s+(?:when|what|how|where|who|why|if|whether|the\s+time|last\s+time|me|to)\b)"
    r"(?:\s+(?:that|this|of\s+this))?\s*(?:[,:]\s*|\s+|-\s*)(?:please[,\s]+)?(?P<rest>.+)$",
    re.IGNORECASE,
)
_PROMISE_WOULD = LazyRegex(
    r"(\b(?:promised|swore|vowed|pledged)\b[^.!?]{0,60}?\b(?:I|we))(?:['’]d|\s+would)\b",
    re.IGNORECASE,
)
_CONDITIONAL_START = LazyRegex(
    r"^(?:if|unless|suppose|supposing|imagine|assuming|in\s+case|even\s+if|what\s+if|"
    r"once|whenever|as\s+soon\s+as)\b",
    re.IGNORECASE,
)
_QUESTION_START = LazyRegex(
    r"^(?:do|does|did|are|is|was|were|can|could|would|will|should|shall|have|has|had|what|"
    r"what['’]s|where|where['’]s|when|who|who['’]s|whom|whose|why|how|how['’]s|which|am|might|"
    r"isn['’]t|aren['’]t|don['’]t|doesn['’]t|didn['’]t|won['’]t|wouldn['’]t|can['’]t|"
    r"couldn['’]t|shouldn['’]t|haven['’]t|hasn['’]t|any\s+idea|guess\s+where)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL = LazyRegex(
    r"\b(?:if|wish|wished|imagine|imagining|suppose|supposing|pretend|pretending|"
    r"hypothetically|would|could|might|maybe|perhaps|unless|whether|should|someday|"
    r"dreaming|daydream\w*|fantasi[sz]e\w*|considering|thinking\s+(?:about|of)|in\s+theory|"
    r"let['’]s\s+say|probably|possibly)\b|\b(?:I|we|you|they|he|she)['’]d\b",
    re.IGNORECASE,
)
_REPORTED = LazyRegex(
    r"\b(?:said|says|saying|told|tells|telling|claims?|claimed|mentioned|mentions|heard|"
    r"hears|according\s+to|thinks|thought|believes|believed|asked|asks|reckons|rumou?red|"
    r"apparently|supposedly|allegedly|wrote|writes|texted|posted|announced|insists|insisted|"
    r"joked|joking|kidding|jk)\b",
    re.IGNORECASE,
)
# A pasted interview transcript ("Q. Can you introduce yourself? A. My name's Dolly and I'm
# from New Delhi."): its "I" is whoever answered, not the speaker (LongMemEval: one such turn
# made the user "Dolly" and "Lakshay", from New Delhi, a quality associate at Amazon). A
# turn with a question line and an answer line is read for nothing.
_TRANSCRIPT_LINE = LazyRegex(
    r"(?m)^[ \t]*(?:(?P<q>Q|Question|Interviewer|Moderator)|(?P<a>A|Answer|Interviewee|"
    r"Respondent))[ \t]*\d{0,3}[ \t]*[.:)][ \t]")
_QUOTED = LazyRegex(rf"[\"“«„].{{0,300}}?{SPEECH_WORDS}", re.IGNORECASE)
_CODE = LazyRegex(r"[{}<>\\|]|==|=>|->|::|\(\)|\w\(|=\s*\S|;\s*$|^\s*[$#>]\s")
_NEGATION = LazyRegex(
    r"\b(?:not|never|no|nobody|nothing|nowhere|neither|nor|none|without|anymore|hardly|"
    r"barely|cannot|dont|cant|wont|didnt|doesnt|isnt|wasnt|arent|werent|havent|hasnt|hadnt|"
    r"shouldnt|wouldnt|couldnt|aint)\b|\b(?:no|any)\s+(?:longer|more)\b|n['’]t\b",
    re.IGNORECASE,
)
# A change said without the old value: "I prefer mild food now", "... instead".
_CHANGE = LazyRegex(
    r"(?<!\bright\s)(?<!\bjust\s)(?<!\bfor\s)(?<!\bby\s)(?<!\buntil\s)(?<!\btill\s)"
    r"\b(?:now|instead|these\s+days|nowadays)\b(?!\s+and\s+then)",
    re.IGNORECASE,
)
# A sentence that is only a job title ("software engineering intern"): the speaker's title
# when the same turn names the speaker's new employer ("I'm with Google now!! ... intern").
_BARE_TITLE = LazyRegex(rf"^(?:an?\s+)?{JOB}\s*[.!]*$", re.IGNORECASE)
BARE_TITLE_CONFIDENCE = 0.6
_DURATION = LazyRegex(
    r"\bfor\s+(?:the\s+(?:past|last)\s+)?(?P<n>\d{1,3}|a|an|one|two|three|four|five|six|seven|"
    r"eight|nine|ten|a\s+couple\s+of)\s+(?P<unit>day|week|month|year)s?\b",
    re.IGNORECASE,
)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_WORD_N = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2}  # fmt: skip
_REL_EXTRA = {"best friends": "friend_of", "friends": "friend_of", "married": "married_to",
              "together": "has_partner", "coworkers": "colleague_of",
              "colleagues": "colleague_of"}  # fmt: skip


UNNAMED_PREFIX = "user's "  # the label of an unnamed relative: "my brother" -> "user's brother"

_PRONOUN_START = LazyRegex(r"^(?P<p>he|she)(?P<s>['’]s|\s+)(?P<been>(?:been|got|gotten|gone)\b)?",
                            re.IGNORECASE)


@functools.cache
def _rel_mention() -> re.Pattern[str]:
    """"my (older) brother (Tom)": compiled on first use, like the rules."""
    return re.compile(
        rf"\bmy\s+{REL_ADJS}(?P<rel>{alt(tuple(RELATION_OF))})(?![\w'’-])"
        rf"(?:,?\s+(?P<name>{NAME_BODY}))?", re.IGNORECASE)


_NAME_LEAD = LazyRegex(rf"^(?P<name>{NAME_BODY})(?:[.!]?$|\s+(?-i:[a-z]))")
# "Having a walking buddy will be great": a clause led by a gerund names no one.
_GERUND = LazyRegex(r"[A-Z][a-z]{2,}ing")
_I_FORMS = frozenset({"i", "i'm", "i've", "i'll", "i'd", "i’m", "i’ve", "i’ll", "i’d"})
_WORD = LazyRegex(r"[^\W\d_][\w'’]*")
_UNIT_WORDS = frozenset({"team", "department", "group", "division", "unit", "office", "shift",
                         "floor", "desk", "squad"})
_REFERENT_REACH = 2  # "he"/"she" may name a person mentioned at most this many clauses back
# Where the speaker is, said before "here" in the same turn: a greeting from a place ("Hola
# from Mexico City!") or "I'm (now) in Austin"; a place someone lives or moved to counts too.
_HERE_PLACE = LazyRegex(
    r"(?:^(?:greetings|hello|hi|hola|hey|bonjour|ciao|salut|aloha|howdy)\s+from|"
    r"\bI['’]?m\s+(?:now\s+|currently\s+|finally\s+)?in)\s+"
    r"(?P<place>(?-i:[A-Z])[\w'’.-]*(?:\s+(?-i:[A-Z])[\w'’.-]*){0,3})",
    re.IGNORECASE)
_PLACE_PREDICATES = frozenset(("lives_in", "moved_to"))
# "moved here", "live here": the verb and the preposition its place takes.
_HERE = LazyRegex(r"\b(?P<verb>moved|moving|relocated|live|living|lived|based|settled)\s+here\b"
                  r"(?!\s*,?\s*(?:in|at|to)\s)",
                  re.IGNORECASE)


@dataclass
class _Referent:
    """Who "he"/"she" at the start of a clause names: the last third party of the turn."""

    text: str | None = None  # as it would be written: "Eli", "my son"
    gender: str | None = None  # "he", "she" or None (a name: either)
    age: int = 0  # clauses since the mention
    place: str | None = None  # what "here" names: the last current place of the turn

    def resolve(self, clause: str) -> str:
        if self.place is not None and "here" in clause.lower():
            clause = _HERE.re.sub(self._there, clause)
        m = _PRONOUN_START.re.match(clause)
        if m is None or self.text is None or self.age > _REFERENT_REACH:
            return clause
        pronoun = m.group("p").lower()
        if self.gender is not None and self.gender != pronoun:
            return clause
        verb = (" has " if m.group("been") else " is ") if m.group("s").strip() else " "
        return self.text + verb + clause[m.end("s"):]

    def _there(self, m: re.Match[str]) -> str:
        verb = m.group("verb")
        prep = "to" if verb.lower() in ("moved", "moving", "relocated") else "in"
        return f"{verb} {prep} {self.place}"

    def update(self, clause: str, cands: list[CandidateBelief]) -> None:
        places = [c.object for c in cands if c.predicate in _PLACE_PREDICATES and not c.negated]
        if places:
            self.place = places[-1]
        elif (said := _HERE_PLACE.re.search(clause)) and said.group("place"):
            self.place = said.group("place").rstrip(".")
        self.age += 1
        third = [c.subject for c in cands if c.subject != SPEAKER]
        mentions = list(_rel_mention().finditer(clause)) if "my" in clause.lower() else []
        mention = mentions[-1] if mentions else None
        if third:
            subject = third[-1]
            if subject.startswith(UNNAMED_PREFIX):
                word = subject.removeprefix(UNNAMED_PREFIX)
                self._set("my " + word, REL_GENDER.get(word))
            else:
                word = rel_label(mention.group("rel")) if mention and mention.group("name") \
                    == subject else ""
                self._set(subject, REL_GENDER.get(word))
        elif mention is not None:
            word = rel_label(mention.group("rel"))
            name = mention.group("name")
            self._set(name if name else "my " + word, REL_GENDER.get(word))
        elif (lead := _NAME_LEAD.re.match(clause)) and clean_name(lead.group("name")) \
                and not _GERUND.re.fullmatch(lead.group("name")):
            self._set(clean_name(lead.group("name")) or "", None)  # "Theo." / "Tess moved out"

    def _set(self, text: str, gender: str | None) -> None:
        self.text, self.gender, self.age = text, gender, 0


def _casual(clause: str) -> bool:
    """Written without capitals ("i moved to denver"): a lowercase place may be a name."""
    words = _WORD.re.findall(clause)[1:]
    return not any(w.lower() not in _I_FORMS and not w.islower() for w in words)


@dataclass(frozen=True)
class _Gates:
    blocked: bool
    negated: bool


def _gates(clause: str) -> _Gates:
    stripped = clause.rstrip()
    blocked = bool(
        stripped.endswith("?")
        or _QUESTION_START.re.match(clause)
        or _HYPOTHETICAL.re.search(clause)
        or _REPORTED.re.search(clause)
        or _QUOTED.re.search(clause)
        or _CODE.re.search(clause)
    )
    return _Gates(blocked=blocked, negated=bool(_NEGATION.re.search(clause)))


def _require_aware(when: datetime) -> datetime:
    if not isinstance(when, datetime) or when.tzinfo is None or when.utcoffset() is None:
        raise InvalidInputError(
            f"TurnText.occurred_at {when!r} must be a timezone-aware datetime (UTC): "
            "build it with datetime(..., tzinfo=timezone.utc)"
        )
    return when


def extract_heuristic(turn: TurnText) -> list[CandidateBelief]:
    """Rule-based candidate beliefs of one turn, de-duplicated, in text order.

    Never raises on any text; raises InvalidInputError if ``turn.occurred_at`` is naive.
    """
    anchor = _require_aware(turn.occurred_at)
    if not isinstance(turn.text, str) or not turn.text.strip():
        return []
    # The assistant's turns are no source of beliefs: memory holds what the user (or a named
    # person) says. An assistant's first-person sentences are drafts, role-play and
    # pleasantries, its others world knowledge: LongMemEval showed "assistant name is Donate",
    # "assistant plans to raise $500" (a business plan it drafted), "Rodinal job title is
    # high-contrast developer", and before that 1,943 of 1,978 "remembers" beliefs from its
    # "Remember, ..." advice.
    if speaker_role(turn.speaker) == ASSISTANT or _transcript(turn.text):
        return []
    best: dict[tuple[str, str, str, bool], CandidateBelief] = {}
    referent = _Referent()
    named = _named_speaker(turn.speaker)
    sentences = split_sentences(turn.text)
    for sentence in sentences:
        for cand in _extract_sentence(sentence, anchor, referent):
            if named is not None and _someone_elses_name(cand, named):
                continue  # "I'm Mel, by the way." said by Caroline: not Caroline's name
            key = (normalize_label(cand.subject), cand.predicate,
                   normalize_label(cand.object), cand.negated)  # fmt: skip
            if key not in best or cand.confidence > best[key].confidence:
                best[key] = cand
    title = _bare_title(sentences, best)
    if title is not None:
        best[(SPEAKER, title.predicate, normalize_label(title.object), False)] = title
    promised = {(k[0], k[2]) for k in best if k[1] == "committed_to"}
    # "I promised I'll do X tomorrow" is a commitment, not also a plan.
    return [c for k, c in best.items() if not (k[1] == "plans_to" and (k[0], k[2]) in promised)]


def _transcript(text: str) -> bool:
    """Whether ``text`` holds a pasted interview: a question line and an answer line."""
    if "\n" not in text:
        return False
    kinds = {m.lastgroup for m in _TRANSCRIPT_LINE.re.finditer(text[:MAX_TEXT_CHARS])}
    return kinds == {"q", "a"}


def _named_speaker(speaker: str) -> str | None:
    """The speaker's name when the turn gives one: not the user, whose name memory learns
    from what they say."""
    label = normalize_label(speaker)
    if not label or label in SELF_LABELS:
        return None
    return label


def _someone_elses_name(cand: CandidateBelief, speaker: str) -> bool:
    """A name said in passing ("X here", "I'm X") that is no form of the named speaker's own
    ("Tim Smith" or "Mel" are forms of "Tim" or "Melanie": one begins the other)."""
    if cand.predicate != "name_is" or cand.confidence > rules.SELF_INTRODUCTION_CONFIDENCE:
        return False
    found = normalize_label(cand.object)
    return not (found.startswith(speaker) or speaker.startswith(found))


def _bare_title(sentences: list[str],
                best: dict[tuple[str, str, str, bool], CandidateBelief]) -> CandidateBelief | None:
    """The speaker's title said as a sentence of its own, in a turn that names the speaker's
    employer and no other title of theirs."""
    mine = {(k[1], k[3]) for k in best if k[0] == SPEAKER}
    if ("works_at", False) not in mine or ("job_title_is", False) in mine:
        return None
    for sentence in sentences:
        m = _BARE_TITLE.re.match(sentence.strip())
        if m is not None:
            job = " ".join(m.group("job").lower().split())
            return CandidateBelief(SPEAKER, "job_title_is", job, "heuristic",
                                   BARE_TITLE_CONFIDENCE, None, None)
    return None


def _extract_sentence(sentence: str, anchor: datetime,
                      referent: _Referent | None = None) -> list[CandidateBelief]:
    text = sentence
    explicit_match = _EXPLICIT.re.match(text)
    explicit = explicit_match is not None
    if explicit_match:
        text = explicit_match.group("rest")
    text = _PROMISE_WOULD.re.sub(r"\1 will", text)
    out: list[CandidateBelief] = []
    # A leading condition governs the whole sentence: "If I get the job, I'm moving to X".
    conditional = _CONDITIONAL_START.re.match(text) is not None
    referent = referent if referent is not None else _Referent()
    for clause in [] if conditional else clauses(text):
        clause = referent.resolve(clause)
        gates = _gates(without_titles(clause))
        found: list[CandidateBelief] = []
        if not gates.blocked:
            phrases = find_date_phrases(clause)
            present = rules.present_gates(clause)
            for rule in rules.rules_for(gates.negated, present):
                for match in rule.pattern.finditer(clause):
                    found.extend(_apply(rule, match, clause, phrases, anchor, explicit))
        referent.update(clause, found)
        if found and not gates.negated and _CHANGE.re.search(clause):
            found = [dataclasses.replace(c, replaces=True)
                     if c.predicate in REPLACEABLE and not c.negated else c for c in found]
        out.extend(found)
    if explicit_match and not out:
        # "Remember, ..." (a comma after the word) without the speaker in it is counsel
        # ("Remember, it's all about progress, not perfection"; LongMemEval: every one of
        # them), not a thing to keep; "remember that ..." is a request as it stands.
        remembered = clean_remembered(
            text, counsel="," in sentence[: explicit_match.start("rest")])
        if remembered:
            belief = CandidateBelief(
                SPEAKER, "remembers", remembered, "user_explicit", REMEMBER_CONFIDENCE, None, None
            )
            out.append(belief)
    return out


def _group_values(
    rule: rules.Rule, match: re.Match[str], clause: str, phrases: list[DatePhrase]
) -> dict[str, tuple[str, ...]]:
    """Each filled group's cleaned value(s); a group that fails cleaning is left out."""
    values: dict[str, tuple[str, ...]] = {}
    for group, raw in match.groupdict().items():
        if raw is None:
            continue
        cleaned: tuple[str, ...] | str | None
        if group in ("obj", "obj2", "dest"):
            policy = "proper" if group == "dest" else rule.policy
            span = _without_dates(clause, match.start(group), match.end(group), phrases, policy)
            cleaned = clean_object(span, policy, rule.max_words, rule.split_and, rule.reject,
                                   rule.strip_possessive)  # fmt: skip
            if cleaned is None and policy == "proper" and _casual(clause):
                cleaned = clean_lower_place(span)
        elif group == "rel":
            cleaned = _lookup(group, raw)
            values["relword"] = (rel_label(raw),)
        elif group in ("name", "name2"):
            cleaned = clean_name(raw)
        else:
            cleaned = _lookup(group, raw)
        if isinstance(cleaned, str):
            cleaned = (cleaned,)
        if cleaned:
            values[group] = cleaned
    return values


def _lookup(group: str, raw: str) -> str | None:
    word = " ".join(raw.lower().split())
    if group == "rel":
        return RELATION_OF.get(word) or _REL_EXTRA.get(word)
    if group == "verb":
        return VERB_LEMMA.get(word, word)
    if group == "n":
        return NUMBER_WORDS.get(word, word)
    if group == "age":
        return word if word.isdigit() and 1 <= int(word) <= 120 else None
    if group in ("nat", "lang", "lang2"):
        return word.title() if len(word) > 3 else word.upper()
    if group == "p":
        return word.replace(" ", "")
    return word


def _without_dates(
    clause: str, start: int, end: int, phrases: list[DatePhrase], policy: str
) -> str:
    """The group's text with date phrases turned into a hard stop (``","``)."""
    if policy == "date":
        return clause[start:end]
    chars = list(clause[start:end])
    for p in phrases:
        lo, hi = max(p.start, start), min(p.end, end)
        if lo < hi:
            chars[lo - start : hi - start] = [","] + [" "] * (hi - lo - 1)
    return "".join(chars)


def _since_duration(clause: str, anchor: datetime) -> datetime | None:
    """"for 5 years" -> the start of the day five years (of 365 days) before the anchor."""
    m = _DURATION.re.search(clause)
    if not m:
        return None
    raw = " ".join(m.group("n").lower().split())
    n = int(raw) if raw.isdigit() else _WORD_N[raw]
    try:
        start = anchor - timedelta(days=n * _UNIT_DAYS[m.group("unit").lower()])
    except OverflowError:
        return None
    return start.replace(hour=0, minute=0, second=0, microsecond=0)


def _dates(
    rule: rules.Rule, clause: str, phrases: list[DatePhrase], anchor: datetime
) -> tuple[datetime | None, datetime | None, bool]:
    """(valid_from, valid_to, found) for the rule's date role, from the clause's phrases."""
    prefer: Prefer = "future" if rule.date_role == "deadline" else "past"
    interval, before = None, False
    for p in phrases:
        interval = resolve_relative(p.text, anchor, prefer=prefer)
        if interval:
            before = p.text.lower().startswith("before")
            break
    if interval is None and rule.date_role == "since":
        since = _since_duration(clause, anchor)
        return since, None, since is not None
    if interval is None:
        return None, None, False
    if rule.negated:
        return None, interval[0], True
    if rule.date_role in ("event", "since"):
        # A future date in a past-event clause describes something else ("decided to sell
        # the house next spring"): the event itself happened at the turn time.
        return (interval[0] if interval[0] <= anchor else None), None, True
    if rule.date_role == "deadline":  # "by Friday" ends with Friday, "before May" at May
        return None, interval[0] if before else interval[1], True
    return None, None, True


def _apply(
    rule: rules.Rule,
    match: re.Match[str],
    clause: str,
    phrases: list[DatePhrase],
    anchor: datetime,
    explicit: bool,
) -> list[CandidateBelief]:
    values = _group_values(rule, match, clause, phrases)
    valid_from, valid_to, dated = _dates(rule, clause, phrases, anchor)
    if rule.requires_date and not dated:
        return []
    is_explicit = explicit or rule.explicit
    source: Source = "user_explicit" if is_explicit else "heuristic"
    confidence = max(rule.confidence, EXPLICIT_CONFIDENCE) if explicit else rule.confidence
    out = []
    for subject_t, predicate_t, object_t in rule.emits:
        for subject, predicate, obj in _expand(subject_t, predicate_t, object_t, values):
            if predicate not in PREDICATES or check_subject(subject) is not None:
                continue
            if predicate == "works_at" and obj.lower().rsplit(" ", 1)[-1] in _UNIT_WORDS:
                continue  # "a nurse at the night shift", "engineer at the platform team"
            out.append(CandidateBelief(subject, predicate, obj, source, confidence,
                                       valid_from, valid_to, rule.negated))  # fmt: skip
    return out


_FIELD = LazyRegex(r"\{(\w+)\}")


def _fill(template: str, values: dict[str, str]) -> str:
    return _FIELD.re.sub(lambda m: values[m.group(1)], template)


def _expand(
    subject_t: str, predicate_t: str, object_t: str, values: dict[str, tuple[str, ...]]
) -> list[tuple[str, str, str]]:
    """Fill the templates; one triple per alternative of a split object, none if unfilled."""
    derived = dict(values)
    if "rel" in values:
        derived["rel_pred"] = values["rel"]
        if "name" not in values and "relword" in values:  # "my brother lives in ..."
            derived["name"] = (UNNAMED_PREFIX + values["relword"][0],)
    if "verb" in values:
        derived["verb_lemma"] = values["verb"]
    needed = {f for t in (subject_t, predicate_t, object_t) for f in _FIELD.re.findall(t)}
    if not needed <= derived.keys():
        return []
    multi = [f for f in needed if len(derived[f]) > 1]
    variants = derived[multi[0]] if multi else (None,)
    out = []
    for variant in variants:
        fill = {f: derived[f][0] for f in needed}
        if multi and variant is not None:
            fill[multi[0]] = variant
        subject, predicate, obj = (_fill(t, fill) for t in (subject_t, predicate_t, object_t))
        obj = " ".join(obj.split())
        if obj:
            out.append((subject, predicate, obj))
    return out
