"""The rule table of the heuristic extractor: lexicons, regex building blocks and rules.

Data, not logic: ``memory_core.extraction.heuristic`` runs these. Each rule is a compiled regex over
one clause plus the triples it emits. Group names carry meaning: ``obj``/``obj2``/``dest``
are cleaned by the rule's object policy, ``name``/``name2`` are person names, ``rel``,
``verb``, ``n``, ``species``, ``nat``, ``lang`` ... are looked up or normalised. Emit
templates are ``"<subject> <predicate> <object template>"``; an emit that names a group
the match did not fill is skipped.

Regexes stay linear: no nested unbounded quantifiers; clauses are capped in length.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory_core.extraction.lexicon import (
    ADV,
    APPOINTMENTS,
    CAPS,
    DATE_SURFACE,
    DATE_SURFACE_BARE,
    DIETS,
    END,
    EVENTS,
    GENDERS,
    I_AM,
    I_HAVE,
    JOB,
    LANGUAGES,
    MONTH_RE,
    NAME,
    NAME2,
    NAME_BODY,
    NATIONALITIES,
    NUMBER_WORDS,
    OBJ,
    PET_ADJ,
    PRACTICES,
    REL,
    REL_ADJS,
    SPECIES,
    SPECIES_RE,
    TITLE_BODY,
    TP,
    VENUES,
    WE,
    WE_ARE,
    WE_HAVE,
    GateScan,
    alt,
    lex,
    required_literals,
)

Policy = Literal["entity", "proper", "phrase", "pref", "date"]
DateRole = Literal["none", "event", "since", "deadline"]




@dataclass(frozen=True)
class Rule:
    """One rule. Its regex compiles on first use: importing the extractor stays cheap (the
    whole table costs ~0.4 s of ``re.compile``), and a process that never extracts never pays."""

    name: str
    source: str  # the regex, matched case-insensitively
    emits: tuple[tuple[str, str, str], ...]
    policy: Policy = "entity"
    date_role: DateRole = "none"
    negated: bool = False
    confidence: float = 0.7
    explicit: bool = False
    requires_date: bool = False
    max_words: int = 6
    split_and: bool = False
    strip_possessive: bool = False  # "my first car" -> "first car" (the owner is the subject)
    reject: frozenset[str] = frozenset()

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, re.IGNORECASE)

    @functools.cached_property
    def gate(self) -> frozenset[str]:
        """Lowercase strings one of which any match contains (empty: always run)."""
        return required_literals(self.source)


def _r(name: str, pattern: str, *emits: str, **options: object) -> Rule:
    triples = tuple(tuple(e.split(" ", 2)) for e in emits)
    return Rule(name, pattern, triples, **options)  # type: ignore[arg-type]


_S = "@speaker"
_NOT_DET = r"(?!(?:the|a|an|my|our|his|her|their|your|this|that|some)\b)"
_LEARN_REJECT = frozenset(lex("a lot|lots|so much|much|more|a ton|things|stuff|everything"))
_LEARNING = rf"(?:{I_AM}|{I_HAVE}\s+been|\bI\s+{ADV}(?:started|began))\s+{ADV}learning\s+"

# "Maya here!", "it's Ken again", "I'm Dev": the speaker's name said in passing, weaker than "my
# name is"; a speaker the turn already names is named so only by a form of that name
# (``heuristic._someone_elses_name``), since greetings look the same ("Congrats again!").
SELF_INTRODUCTION_CONFIDENCE = 0.6

IDENTITY_RULES = (
    _r("name", rf"\bmy\s+name(?:['’]s|\s+is)\s+{NAME}", f"{_S} name_is {{name}}",
       explicit=True, confidence=0.95),
    _r("call_me", rf"\bcall\s+me\s+{NAME}", f"{_S} preferred_name_is {{name}}",
       explicit=True, confidence=0.9),
    _r("intro", rf"^I(?:['’]?m|\s+am)\s+{NAME}(?=\s*(?:$|[,.!]|and\b|btw\b|here\b))",
       f"{_S} name_is {{name}}", confidence=SELF_INTRODUCTION_CONFIDENCE),
    # Not "X again": "Try again." and "Wrong again." say it far more often than a name does
    # (in one LongMemEval chat the user became "Try"); "it's Ken again" says it plainly.
    _r("here", rf"^{NAME}\s+(?:here|checking\s+in)(?=\s*(?:$|[,.!;:]))",
       f"{_S} name_is {{name}}", confidence=SELF_INTRODUCTION_CONFIDENCE),
    _r("its_me", rf"^it['’]?s\s+{NAME}\s+(?:again|here)(?=\s*(?:$|[,.!;:]))",
       f"{_S} name_is {{name}}", confidence=SELF_INTRODUCTION_CONFIDENCE),
    _r("go_by", rf"\bI\s+go\s+by\s+{NAME}", f"{_S} preferred_name_is {{name}}", confidence=0.8),
    _r("age", rf"{I_AM}\s+{ADV}(?P<age>\d{{1,3}})(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?"
       r"(?=\s*(?:$|[,.!;]|and\b|but\b|now\b|this\b|today\b|btw\b))", f"{_S} age_is {{age}}"),
    _r("turned", rf"\bI\s+{ADV}turned\s+(?P<age>\d{{1,3}})(?![\w%])(?!\s+(?:minutes|hours))",
       f"{_S} age_is {{age}}", date_role="since"),
    _r("gender", rf"(?:{I_AM}\s+(?:an?\s+)?{ADV}|\bas\s+an?\s+|\bI\s+identify\s+as\s+(?:an?\s+)?)"
       rf"(?P<g>{alt(GENDERS)}){END}", f"{_S} gender_identity_is {{g}}", confidence=0.8),
    _r("pronouns", r"\bmy\s+pronouns\s+are\s+(?P<p>[a-z]+\s*/\s*[a-z]+(?:\s*/\s*[a-z]+)?)",
       f"{_S} pronouns_are {{p}}", confidence=0.9),
    _r("nationality", rf"{I_AM}\s+{ADV}(?:an?\s+)?(?P<nat>{alt(NATIONALITIES)})"
       rf"(?:\s+citizen)?(?=\s*(?:$|[,.!;]|and\b|but\b|by\s+birth\b|too\b|btw\b))",
       f"{_S} nationality_is {{nat}}"),
    _r("speaks", rf"\bI\s+{ADV}speak\s+(?:fluent\s+|some\s+|a\s+little\s+|basic\s+)?"
       rf"(?P<lang>{alt(LANGUAGES)})(?:\s*(?:,|and|&)\s*(?:fluent\s+)?"
       rf"(?P<lang2>{alt(LANGUAGES)}))?(?![\w-])", f"{_S} speaks {{lang}}",
       f"{_S} speaks {{lang2}}"),
    _r("fluent", rf"(?:{I_AM}\s+{ADV}(?:fluent|native)\s+in|\bmy\s+(?:native|first|mother)\s+"
       rf"(?:language|tongue)\s+is)\s+(?P<lang>{alt(LANGUAGES)})(?![\w-])",
       f"{_S} speaks {{lang}}"),
    _r("learning", rf"{_LEARNING}(?!(?:how\s+)?to\s){OBJ}", f"{_S} learning {{obj}}",
       max_words=4, date_role="since", reject=_LEARN_REJECT),
    # "I'm learning how to play the violin": Tim is learning to play the violin (not "...
    # learning play the violin").
    _r("learning_to", rf"{_LEARNING}(?:how\s+)?to\s+{OBJ}", f"{_S} learning to {{obj}}",
       max_words=4, date_role="since", reject=_LEARN_REJECT),
    _r("lessons", rf"{I_AM}\s+{ADV}taking\s+{_NOT_DET}(?P<obj>[a-z]+(?:\s+[a-z]+)?)\s+"
       r"(?:lessons|classes)\b", f"{_S} learning {{obj}}", policy="phrase",
       reject=frozenset(lex("some|more|online|evening|night|extra|two|three|private|group"))),
    _r("born_on", rf"\bI\s+was\s+born\s+(?:on|in)\s+{DATE_SURFACE}", f"{_S} born_on {{obj}}",
       policy="date"),
    _r("birthday", rf"\bmy\s+birthday\s+is\s+(?:on\s+)?{DATE_SURFACE}", f"{_S} born_on {{obj}}",
       policy="date", confidence=0.85),
    _r("born_in", rf"\bI\s+was\s+born(?:\s+and\s+raised)?(?:\s+(?:on|in)\s+{DATE_SURFACE_BARE})?\s+"
       rf"in\s+(?!(?:19|20)\d\d|{MONTH_RE}\b){OBJ}", f"{_S} born_in {{obj}}", policy="proper"),
)

# A count in words ("three sessions of"): the lexicon's number words but the article.
_COUNT = alt(tuple(w for w in NUMBER_WORDS if w not in ("a", "an")))
_EVENT_PHRASE = rf"(?:(?:a|an|the|my|our)\s+)?(?:[\w'’-]+\s+){{0,3}}?{alt(EVENTS)}s?"
LOCATION_RULES = (
    _r("live", rf"{WE}\s+{ADV}live\s+in\s+{OBJ}", f"{_S} lives_in {{obj}}", policy="proper",
       date_role="since", confidence=0.8),
    _r("living", rf"{WE_ARE}\s+{ADV}(?:living|based|located|settled)\s+in\s+{OBJ}",
       f"{_S} lives_in {{obj}}", policy="proper", date_role="since", confidence=0.75),
    _r("lived", rf"{WE_HAVE}\s+{ADV}(?:lived|been\s+living)\s+in\s+{OBJ}",
       f"{_S} lives_in {{obj}}", policy="proper", date_role="since", confidence=0.7),
    _r("moved", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}(?:moved|relocated)\s+(?:back\s+)?(?:to|into)\s+"
       rf"{OBJ}",
       f"{_S} lives_in {{obj}}", f"{_S} moved_to {{obj}}", policy="proper", date_role="event",
       confidence=0.75),
    _r("moved_out", rf"{WE}\s+{ADV}moved\s+(?:out\s+of|away\s+from)\s+{OBJ}",
       f"{_S} lives_in {{obj}}", policy="proper", negated=True),
    _r("from", rf"(?:{I_AM}\s+{ADV}from|\bI\s+{ADV}(?:come\s+from|grew\s+up\s+in))\s+{OBJ}",
       f"{_S} comes_from {{obj}}", policy="proper", confidence=0.75),
    _r("visited", rf"{WE}\s+{ADV}(?:visited|toured)\s+{OBJ}", f"{_S} visited {{obj}}",
       date_role="event", split_and=True, max_words=4),
    # ... and said without its subject, as chat does ("Took a short trip last week to Rome").
    _r("went_place", rf"(?:{WE}\s+|^){ADV}(?:went|traveled|travelled|flew|drove|took\s+a\s+"
       r"(?:(?:short|quick|little|weekend|day|road|spontaneous)\s+)?trip"
       r"(?:\s+(?:last|this)\s+(?:week|weekend|month|year))?)\s+"
       rf"(?:back\s+)?to\s+(?!{_EVENT_PHRASE}(?![\w-])){OBJ}", f"{_S} visited {{obj}}",
       policy="proper",
       date_role="event", split_and=True, max_words=4),
    _r("went_venue", rf"{WE}\s+{ADV}(?:went|walked|drove)\s+to\s+(?:the|a)\s+"
       rf"(?P<obj>{alt(VENUES)})(?![\w-])", f"{_S} visited {{obj}}", date_role="event",
       confidence=0.65),
    _r("back_from", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}(?:got|gotten|came|come|flew)\s+back\s+"
       r"from\s+"
       rf"{OBJ}", f"{_S} visited {{obj}}", policy="proper", date_role="event", max_words=4,
       confidence=0.65),
    # "the pic I took on my trip to the Smoky Mountains": a trip taken (not "planning my trip
    # to Japan": only after on/during/from, which speak of one made).
    _r("trip_to", r"\b(?:on|during|from)\s+(?:my|our)\s+(?:(?:last|recent|latest|first|"
       rf"road)\s+)?trip\s+to\s+{OBJ}", f"{_S} visited {{obj}}", policy="proper",
       date_role="event", max_words=4, confidence=0.65),
    _r("been_to", rf"{WE_HAVE}\s+{ADV}been\s+to\s+{OBJ}", f"{_S} visited {{obj}}",
       policy="proper", split_and=True, max_words=4, confidence=0.65),
    # "I did attend three sessions of the bereavement support group": the group is what was
    # attended (the count stays in the turn).
    _r("attended", rf"{WE}\s+{ADV}(?:attended|did\s+attend)\s+(?:(?:\d+|{_COUNT}|a\s+few|"
       r"several|some|all|both|many)\s+(?:sessions|meetings|classes|rounds|days|nights)\s+of\s+)?"
       rf"{OBJ}", f"{_S} attended {{obj}}",
       date_role="event", max_words=5),
    _r("was_at_event", rf"{WE}\s+(?:was|were)\s+{ADV}at\s+(?P<obj>{_EVENT_PHRASE})(?![\w-])",
       f"{_S} attended {{obj}}", date_role="event", max_words=5, confidence=0.65),
    _r("went_event", rf"{WE}\s+{ADV}(?:went|go|going)\s+to\s+(?P<obj>(?:(?:a|an|the|my|our)\s+)?"
       rf"(?:[\w'’-]+\s+){{0,3}}?{alt(EVENTS)}s?)(?![\w-])", f"{_S} attended {{obj}}",
       date_role="event", max_words=5, confidence=0.65),
    _r("took_part", rf"{WE}\s+{ADV}(?:ran|participated\s+in|took\s+part\s+in|competed\s+in)\s+"
       rf"(?P<obj>(?:(?:a|an|the|my|our)\s+)?(?:[\w'’-]+\s+){{0,3}}?{alt(EVENTS)})(?![\w-])",
       f"{_S} attended {{obj}}", date_role="event", max_words=5, confidence=0.65),
)

# "the payments team at Stripe": the employer is the part after the unit.
_UNIT = (
    r"(?:the\s+(?:[\w-]+\s+){0,2}?(?:team|group|department|division|office|branch|lab|unit)\s+"
    r"(?:at|of|in)\s+(?=(?-i:[A-Z])))?"
)
# "a small firm called Baker Tilly": the employer is the name.
_CALLED = (
    r"(?:(?:an?|the)\s+(?:[\w-]+\s+){0,3}?(?:company|firm|startup|agency|shop|restaurant|"
    r"bakery|store|studio|lab|nonprofit|place|business|bank|school|hospital|clinic|cafe)\s+"
    r"(?:called|named)\s+(?=(?-i:[A-Z])))?"
)
# What may follow an employer named without a cue ("I joined Stripe last week"), so that
# "I joined Sarah for lunch" is not a job.
_ORG_END = (
    r"(?=\s*(?:$|[,.!;:)]|as\b|in\b|on\b|last\b|this\b|earlier\b|a\s+(?:few|couple)\b|"
    r"(?:\w+\s+){1,2}ago\b|back\b|recently\b|now\b|today\b|yesterday\b|and\s+I\b|so\b|"
    r"but\b|because\b|full[\s-]time\b|part[\s-]time\b|after\b|actually\b|too\b|"
    r"officially\b|lol\b|haha\b))"
)
_JOIN = (
    r"(?:joined|started\s+at|started\s+working\s+(?:at|for)|began\s+at|"
    r"got\s+(?:a|an|the)\s+(?:new\s+)?(?:job|position|role)\s+(?:at|with))"
)
_DIET = (
    rf"(?P<diet>{alt(DIETS)})(?![\w-])(?!\s+(?:restaurant|restaurants|food|place|places|recipe|"
    r"recipes|cafe|option|options|dish|dishes|meal|meals|burger|burgers|cheese|friend|friends|"
    r"bakery|menu|version|chef|cook|cookbook|blog|alternative|alternatives|snack|snacks)\b)"
)
WORK_RULES = (
    _r("work_at", rf"\bI\s+{ADV}work\s+(?:at|for)\s+{_UNIT}{_CALLED}{OBJ}",
       f"{_S} works_at {{obj}}", date_role="since", confidence=0.8),
    _r("joined", rf"\bI(?:['’]ve|\s+have)?\s+{ADV}{_JOIN}\s+{_CALLED}(?P<obj>{CAPS}){_ORG_END}",
       f"{_S} works_at {{obj}}", date_role="since", confidence=0.7),
    _r("join_as", rf"\bI(?:['’]ve|\s+have)?\s+{ADV}(?:{_JOIN}|(?:was|got)\s+hired\s+(?:at|by))\s+"
       rf"[^,.;]{{1,60}}?\s+as\s+(?:an?\s+|the\s+|their\s+|our\s+)?{JOB}",
       f"{_S} job_title_is {{job}}", date_role="since", confidence=0.7),
    _r("with_now", rf"{I_AM}\s+(?:now|currently)\s+with\s+(?P<obj>{CAPS}){_ORG_END}",
       f"{_S} works_at {{obj}}", confidence=0.65),
    _r("with_now_after", rf"{I_AM}\s+with\s+(?P<obj>{CAPS})\s+now\b", f"{_S} works_at {{obj}}",
       confidence=0.65),
    _r("quit_org", rf"\bI\s+{ADV}quit\s+(?P<obj>{CAPS})(?![\w'’-])", f"{_S} works_at {{obj}}",
       negated=True, confidence=0.65),
    _r("promoted", rf"(?:\bI\s+{ADV}|^{ADV})(?:got|was|have\s+been|['’]ve\s+been)\s+{ADV}"
       rf"promoted\s+to\s+(?:an?\s+|the\s+)?{JOB}", f"{_S} job_title_is {{job}}",
       date_role="since", confidence=0.75),
    _r("job_now", rf"{I_AM}\s+{ADV}(?:now|officially)\s+(?:the\s+)?(?!an?\s){JOB}"
       rf"(?:\s+(?:at|for|with)\s+{OBJ})?", f"{_S} job_title_is {{job}}",
       f"{_S} works_at {{obj}}", confidence=0.7),
    _r("their_job_now", rf"{I_AM}\s+{ADV}(?:the|their|our)\s+(?:new\s+)?{JOB}\s+now\b",
       f"{_S} job_title_is {{job}}", confidence=0.65),
    _r("working_at", rf"{I_AM}\s+{ADV}(?:working|employed)\s+(?:at|for|by)\s+{_UNIT}{_CALLED}{OBJ}",
       f"{_S} works_at {{obj}}", date_role="since", confidence=0.75),
    _r("worked_at", rf"{I_HAVE}\s+{ADV}(?:worked|been\s+working)\s+(?:at|for)\s+{OBJ}",
       f"{_S} works_at {{obj}}", date_role="since", confidence=0.7),
    _r("new_job", rf"\bI\s+{ADV}(?:got|landed|accepted|took|started)\s+(?:a|an|the|my)\s+"
       r"(?:new\s+)?(?:job|position|role|internship)\s+(?:at|with)\s+" + OBJ,
       f"{_S} works_at {{obj}}", date_role="since", confidence=0.75),
    _r("started_at", rf"\bI\s+{ADV}(?:started|began)\s+(?:working\s+)?(?:at|for)\s+{OBJ}",
       f"{_S} works_at {{obj}}", date_role="since", confidence=0.7),
    _r("hired", rf"\bI\s+{ADV}(?:was|got)\s+hired\s+(?:at|by)\s+{OBJ}", f"{_S} works_at {{obj}}",
       date_role="since", confidence=0.75),
    _r("quit", rf"\bI\s+{ADV}(?:quit|left)\s+my\s+(?:job|position|role)\s+(?:at|with)\s+{OBJ}",
       f"{_S} works_at {{obj}}", negated=True),
    _r("fired", rf"\bI\s+{ADV}(?:got\s+|was\s+)?(?:fired|laid\s+off)\s+(?:from|by)\s+{OBJ}",
       f"{_S} works_at {{obj}}", negated=True),
    _r("used_to_work", rf"\bI\s+used\s+to\s+work\s+(?:at|for)\s+{OBJ}", f"{_S} works_at {{obj}}",
       negated=True, confidence=0.65),
    _r("job", rf"{I_AM}\s+{ADV}an?\s+{JOB}", f"{_S} job_title_is {{job}}", confidence=0.75),
    _r("job_at", rf"{I_AM}\s+{ADV}an?\s+{JOB}\s+(?:at|for|with)\s+{OBJ}",
       f"{_S} job_title_is {{job}}", f"{_S} works_at {{obj}}", confidence=0.75),
    _r("work_as", rf"\bI\s+{ADV}(?:work|am\s+working|['’]m\s+working)\s+as\s+an?\s+{OBJ}",
       f"{_S} job_title_is {{obj}}", max_words=4, confidence=0.75),
    _r("work_at_as", rf"\bI\s+{ADV}work\s+(?:at|for)\s+[^,.;]{{1,60}}?\s+as\s+an?\s+{JOB}",
       f"{_S} job_title_is {{job}}", confidence=0.75),
    _r("retired", rf"\bI\s+{ADV}(?P<job>retired)(?=\s*(?:$|[,.!;]|last\b|this\b|in\b|after\b))",
       f"{_S} job_title_is {{job}}", date_role="since", confidence=0.7),
    _r("became", rf"\bI\s+{ADV}became\s+an?\s+{JOB}", f"{_S} job_title_is {{job}}",
       date_role="since"),
    _r("status", rf"{I_AM}\s+{ADV}(?P<job>retired|unemployed|self-employed){END}",
       f"{_S} job_title_is {{job}}", confidence=0.7),
    _r("diet", rf"(?:{I_AM}|{I_HAVE}\s+been|\bI\s+{ADV}(?:went|turned|became|switched\s+to|"
       rf"converted\s+to|eat|only\s+eat))\s+{ADV}(?:an?\s+)?(?:strict\s+|full\s+|fully\s+)?"
       rf"{_DIET}", f"{_S} diet {{diet}}", date_role="since", confidence=0.7),
    _r("diet_on", rf"{I_AM}\s+{ADV}(?:doing|on|following)\s+(?:an?\s+|the\s+)?{_DIET}",
       f"{_S} diet {{diet}}", date_role="since", confidence=0.7),
    _r("study_at", rf"\bI(?:['’]?m|\s+am)?\s+{ADV}(?:study|studying|enrolled)\s+(?:at|in)\s+"
       rf"(?=(?-i:[A-Z])){OBJ}", f"{_S} studies_at {{obj}}", policy="proper"),
    _r("field_at", rf"\bI(?:['’]?m|\s+am)?\s+{ADV}(?:study|studying|majoring\s+in)\s+"
       rf"{_NOT_DET}(?P<obj>[\w-]+(?:\s+[\w-]+){{0,2}}?)\s+at\s+(?P<obj2>.{{1,120}})",
       f"{_S} studies {{obj}}", f"{_S} studies_at {{obj2}}", policy="entity", max_words=3,
       reject=frozenset(lex("hard|late|abroad|online|full-time|part-time|tonight"))),
    _r("field", rf"\bI(?:['’]?m|\s+am)?\s+{ADV}(?:study|studying|majoring\s+in)\s+{_NOT_DET}"
       rf"(?!(?:at|in|for|with|hard|late|abroad|online|tonight|all)\b){OBJ}",
       f"{_S} studies {{obj}}", max_words=3),
    _r("student_at", rf"{I_AM}\s+{ADV}an?\s+(?P<job>(?:[\w-]+\s+){{0,2}}?student)\s+(?:at|in)\s+"
       rf"(?=(?-i:[A-Z])){OBJ}", f"{_S} studies_at {{obj}}", policy="proper"),
    # "I'm a third year at UCLA", "I'm Luis, third year at UCLA", "I'm a sophomore at NYU"
    # ("in my third year at Deloitte" is a job's year: not read)
    _r("year_at", rf"{I_AM}\s+(?:(?-i:[A-Z])[\w'’-]+,\s+)?(?:a\s+|an\s+)?"
       r"(?:(?:first|second|third|fourth|fifth|final|last)[\s-]year|freshman|sophomore)"
       r"(?:\s+(?:student|undergrad|undergraduate|grad\s+student|phd\s+student))?"
       rf"\s+at\s+(?=(?-i:[A-Z])){OBJ}", f"{_S} studies_at {{obj}}", policy="proper",
       confidence=0.7),
    _r("graduated", rf"\bI\s+{ADV}graduated\s+from\s+{OBJ}", f"{_S} graduated_from {{obj}}",
       date_role="event"),
    _r("works_on", rf"{I_AM}\s+{ADV}(?:working\s+on|building|writing|developing)\s+"
       rf"(?P<obj>(?:a|an|my|the)\s+.{{1,120}}|(?-i:[A-Z]).{{1,120}})",
       f"{_S} works_on {{obj}}", confidence=0.6, max_words=4),
)

# The aspect before a verb of doing ("I've been playing", "I'm doing", "we're reading").
_BEEN_OR_AM = r"['’]ve\s+been|\s+have\s+been|['’]m|\s+am"
# What one plays ("I also play the piano", "I've been playing Xenoblade Chronicles", "we play
# board games"), not with whom or what part ("play with my dog", "played a big role").
_NOT_PLAYED = (r"(?!(?:with|around|along|it|them|this|that|a\s+(?:big\s+|huge\s+|key\s+)?"
               r"(?:role|part)|an?\s+(?:important|major)|dead|hard|safe|nice|fair|out|together|"
               r"for|on|in|at|to|against|like|by|games?\s+with|some|more|less)\b)")
_PLAYED_LEAD = r"(?:the\s+|a\s+lot\s+of\s+|lots\s+of\s+)"
_PLAY = (rf"{WE}(?:{_BEEN_OR_AM}|['’]re|\s+are)?\s+{ADV}"
         rf"(?:(?:started|began)\s+)?(?:play|playing)\s+{_NOT_PLAYED}"
         rf"{_PLAYED_LEAD}?(?!\S*[#=+])")  # not a chess move: "Qd1#"
# A game's name with its small words ("Ticket to Ride", "Settlers of Catan"): whole.
_GAME_TITLE = (r"(?-i:[A-Z])[\w'’-]*(?:\s+(?:to|of|the|in|on|at)\s+(?:the\s+)?"
               r"(?-i:[A-Z])[\w'’-]*)+(?![\w'’-])")
# How or how much, not what ("I've been playing professionally"), or nothing in particular.
_NO_PLAY = frozenset(lex(
    "ever|professionally|competitively|casually|again|often|well|more|less|together|lately|"
    "now|games|game|sports|sport|music|something|anything|everything"))
ACTIVITY_RULES = (
    _r("plays_title", rf"{_PLAY}(?P<obj>{_GAME_TITLE})", f"{_S} plays {{obj}}",
       policy="phrase", max_words=6, confidence=0.7),
    _r("plays", rf"{_PLAY}(?!{_PLAYED_LEAD}?{_GAME_TITLE}){OBJ}",
       f"{_S} plays {{obj}}", max_words=3,
       split_and=True, confidence=0.7, reject=_NO_PLAY),
    # "I'm doing kickboxing", "I'm off to do some taekwondo", "I started doing aerial yoga",
    # "I practice meditation": practices of a known kind only ("I'm doing great").
    _r("practices", rf"{WE}(?:{_BEEN_OR_AM})?\s+{ADV}"
       rf"(?:(?:off\s+to\s+|going\s+to\s+|started\s+|began\s+)?(?:do|doing)|practi[cs]e|"
       rf"practi[cs]ing|took\s+up|taken\s+up|taking\s+up)\s+(?:some\s+|a\s+lot\s+of\s+)?"
       rf"(?P<obj>{alt(PRACTICES)})(?![\w-])", f"{_S} practices {{obj}}", confidence=0.7),
)

# What one read or watched, when it is named: a quoted title, a list of them, or a
# capitalised title ending where the clause says no more of it ("I just finished reading "The
# Silent Patient"", "we watched "Iron Man" and "The Avengers"", "I rewatched The Shawshank
# Redemption."); not "I read it", "watched LeBron play", nor a plan ("I'm excited to read",
# "I've been meaning to read": no aspect of doing it leads those).
_DONE_LEAD = (rf"{WE}(?:{_BEEN_OR_AM}|['’]re|\s+are|\s+was|\s+were|['’]ve|\s+have|['’]d|"
              rf"\s+had)?\s+{ADV}"
              r"(?:(?:finished|started|began|remember|loved|enjoyed)\s+)?")
_TITLE_Q = rf"[\"“]{TITLE_BODY}[\"”]"
_TITLES = (rf"(?P<obj>{_TITLE_Q}(?:\s*,\s*{_TITLE_Q}){{0,5}}(?:\s*,?\s*(?:and|&)\s+{_TITLE_Q})?)"
           r"(?![\w'’])")
_TITLE_CAPS = (rf"(?P<obj>{CAPS})(?![\w&'’.-])(?=\s*(?:$|[,.!?;:)]|(?:and|but|by|on|in|last|"
               r"yesterday|today|tonight|again|with|recently|lately|over|for|so|too|which|"
               r"before|at|this|the\s+other)\b))")
_NOT_A_TITLE = frozenset(lex("tv|netflix|youtube|hulu|hbo|hbo max|disney+|prime|prime video|"
                             "apple tv|apple tv+|i|it|that|this"))
_READ = r"(?:re-?)?read(?:ing)?\s+"
_WATCH = r"(?:binge-?|re-?)?watch(?:ed|ing)?\s+"
CONSUMED_RULES = (
    _r("read_title", rf"{_DONE_LEAD}{_READ}{_TITLES}", f"{_S} read {{obj}}", policy="phrase",
       split_and=True, max_words=8, date_role="event", confidence=0.7),
    _r("read_caps", rf"{_DONE_LEAD}{_READ}{_TITLE_CAPS}", f"{_S} read {{obj}}",
       date_role="event", confidence=0.6, reject=_NOT_A_TITLE),
    # "I just finished "The Hating Game" by Sally Thorne": a book, by its author.
    _r("read_by", rf"{_DONE_LEAD}(?:finished|listen(?:ed|ing)\s+to)\s+"
       rf"(?P<obj>{_TITLE_Q})\s+by\s+(?-i:[A-Z])", f"{_S} read {{obj}}", policy="phrase",
       max_words=8, date_role="event", confidence=0.65),
    _r("watched_title", rf"{_DONE_LEAD}{_WATCH}{_TITLES}", f"{_S} watched {{obj}}",
       policy="phrase", split_and=True, max_words=8, date_role="event", confidence=0.7),
    _r("watched_caps", rf"{_DONE_LEAD}{_WATCH}{_TITLE_CAPS}", f"{_S} watched {{obj}}",
       date_role="event", confidence=0.6, reject=_NOT_A_TITLE),
)

_PREF_VERBS = r"(?:love|like|enjoy|adore|dig)"
PREFERENCE_RULES = (
    _r("likes", rf"{WE}\s+{ADV}{_PREF_VERBS}\s+{OBJ}", f"{_S} likes {{obj}}", policy="pref",
       split_and=True, confidence=0.7),
    _r("have_loved", rf"{WE_HAVE}\s+{ADV}(?:loved|liked|enjoyed|adored)\s+{OBJ}",
       f"{_S} likes {{obj}}", policy="pref", split_and=True, confidence=0.7),
    _r("into", rf"{I_AM}\s+{ADV}(?:an?\s+(?:big\s+|huge\s+)?fan\s+of|into|obsessed\s+with|"
       rf"passionate\s+about|crazy\s+about)\s+{OBJ}", f"{_S} likes {{obj}}", policy="pref",
       split_and=True, confidence=0.7),
    _r("fan", rf"{I_AM}\s+{ADV}an?\s+(?:big|huge|massive|lifelong|die-hard|diehard)\s+"
       rf"(?P<obj>(?-i:[A-Z])[\w'’.&-]*(?:\s+(?-i:[A-Z])[\w'’.&-]*){{0,2}})\s+fan\b",
       f"{_S} likes {{obj}}", confidence=0.7),
    _r("hates", rf"\bI\s+{ADV}(?:hate|dislike|detest|loathe|despise)\s+{OBJ}",
       f"{_S} dislikes {{obj}}", policy="pref", split_and=True, confidence=0.7),
    _r("prefers", rf"\bI\s+{ADV}prefer\s+{OBJ}", f"{_S} prefers {{obj}}", policy="phrase",
       max_words=6),
    # "I switched from coffee to tea": tea now, coffee no longer.
    _r("switch_to", rf"\bI(?:['’]ve|\s+have)?\s+{ADV}(?:switched|changed|swapped)\s+from\s+"
       rf"(?P<obj2>[^,.;]{{1,40}}?)\s+to\s+{OBJ}", f"{_S} prefers {{obj}}", policy="phrase",
       max_words=4, date_role="since", confidence=0.7),
    _r("switch_from", rf"\bI(?:['’]ve|\s+have)?\s+{ADV}(?:switched|changed|swapped)\s+from\s+"
       rf"(?P<obj2>[^,.;]{{1,40}}?)\s+to\s+{OBJ}", f"{_S} prefers {{obj2}}", policy="phrase",
       max_words=4, negated=True, confidence=0.7),
    _r("favorite", r"\bmy\s+(?:all[\s-]time\s+|absolute\s+|personal\s+)?favou?rite\s+"
       r"(?P<cat>[a-z-]+(?:\s+[a-z-]+)?)(?:\s+of\s+all\s+time|\s+ever|\s+right\s+now)?\s+"
       rf"(?:is|are|has\s+to\s+be)\s+{OBJ}", f"{_S} favorite {{cat}}: {{obj}}", policy="pref",
       confidence=0.8),
    _r("is_favorite", r"^(?P<obj>[^,]{1,40}?)\s+(?:is|are)\s+(?:definitely\s+|still\s+)?my\s+"
       r"(?:all[\s-]time\s+|absolute\s+)?favou?rite\s+(?P<cat>[a-z-]+(?:\s+[a-z-]+)?)"
       r"(?=\s*(?:$|[,.!;]|of\s+all\s+time|ever|and\b))", f"{_S} favorite {{cat}}: {{obj}}",
       policy="pref", confidence=0.75),
)

RELATION_RULES = (
    # "My girlfriend, Toby and I": three people (with the name closed by a comma, "My wife,
    # Sarah, and I", or without the comma, "My wife Sarah and I", it is her name).
    _r("my_rel_name", rf"\bmy\s+{REL_ADJS}{REL}(?:,\s*(?!{NAME_BODY}\s+(?:and|&)\s+(?:I|me|we)\b)"
       rf"|\s+)(?:(?:named|called)\s+)?{NAME}",
       f"{_S} {{rel_pred}} {{name}}", confidence=0.75),
    _r("name_is_my_rel", rf"{NAME}\s+(?:is|was)\s+my\s+{REL_ADJS}{REL}(?![\w'’-])",
       f"{_S} {{rel_pred}} {{name}}", confidence=0.75),
    _r("rel_is_name", rf"\bmy\s+{REL_ADJS}{REL}(?:['’]s\s+name\s+is|\s+is\s+(?:called|named)|"
       rf"\s+is)\s+{NAME}{END}", f"{_S} {{rel_pred}} {{name}}", confidence=0.75),
    _r("have_rel_named", rf"\b(?:I|we)\s+have\s+(?:a|an|one)\s+{REL_ADJS}{REL}\s+(?:named|called)"
       rf"\s+{NAME}", f"{_S} {{rel_pred}} {{name}}", confidence=0.75),
    _r("married_to", rf"{I_AM}\s+{ADV}married\s+to\s+{NAME}", f"{_S} married_to {{name}}",
       confidence=0.8),
    _r("married", rf"\bI\s+{ADV}(?:married|wed)\s+{NAME}", f"{_S} married_to {{name}}",
       date_role="since", confidence=0.75),
    _r("dating", rf"(?:{I_AM}|\bI\s+{ADV}got)\s+{ADV}(?:dating|engaged\s+to|"
       rf"in\s+a\s+relationship\s+with)\s+{NAME}",
       f"{_S} has_partner {{name}}", date_role="since", confidence=0.75),
    _r("name_and_i", rf"{NAME}\s+and\s+I\s+(?:are|have\s+been)\s+{ADV}(?P<rel>best\s+friends|"
       r"friends|married|together|coworkers|colleagues)\b", f"{_S} {{rel_pred}} {{name}}",
       date_role="since", confidence=0.7),
    _r("divorced", rf"\bI\s+{ADV}divorced\s+{NAME}", f"{_S} married_to {{name}}", negated=True),
    _r("broke_up", rf"\bI\s+{ADV}(?:broke\s+up|split\s+up)\s+with\s+{NAME}",
       f"{_S} has_partner {{name}}", negated=True),
    _r("name_and_i_broke_up", rf"{NAME}\s+and\s+I\s+{ADV}(?:broke\s+up|split\s+up|"
       r"separated|called\s+it\s+quits)\b", f"{_S} has_partner {{name}}", negated=True),
    _r("seeing_someone", rf"(?:{I_AM}|\bI\s+{ADV}started)\s+{ADV}(?:seeing|dating)\s+someone"
       rf"(?:\s+new)?,?\s+(?:her|his|their)\s+name(?:['’]s|\s+is)\s+{NAME}",
       f"{_S} has_partner {{name}}", date_role="since", confidence=0.7),
    _r("seeing", rf"{I_AM}\s+{ADV}seeing\s+{NAME}(?=\s*(?:$|[,.!;]|now\b|and\b|these\b))",
       f"{_S} has_partner {{name}}", date_role="since", confidence=0.65),
    _r("kids_count", r"\b(?:I|we)\s+have\s+(?P<n>\d|one|two|three|four|five|six|seven|eight)\s+"
       r"(?:(?:young|little|grown|adult|beautiful|amazing|wonderful|lovely)\s+)?(?:kids|children)"
       r"\b", f"{_S} child_count_is {{n}}", confidence=0.8),
    _r("parent_of", rf"{I_AM}\s+{ADV}an?\s+(?:mom|mum|mother|dad|father|parent)\s+of\s+"
       r"(?P<n>\d|one|two|three|four|five|six|seven|eight)\b(?!\s+(?:dogs|cats|pets))",
       f"{_S} child_count_is {{n}}", confidence=0.75),
)

_PET_ADJS = rf"(?:{alt(PET_ADJ)}\s+){{0,2}}"
_PETS = rf"(?:a|an|one|two|three|\d)\s+{_PET_ADJS}{alt(SPECIES)}(?:s|es)?"
_PET_END = (
    r"(?=\s*(?:$|[,.!;]|and\b|who\b|at\s+home|now\b|too\b|as\s+well|last\b|this\b|"
    r"yesterday\b|recently\b))"
)
# What was bought, said of no thing in particular ("I've bought a bunch of stuff").
_NO_PURCHASE = frozenset(lex(
    "stuff|things|bunch of stuff|bunch of things|lot of stuff|lot of things|lots of stuff|"
    "lots of things|few things|couple of things|some things|everything|nothing|it|them|"
    # "where I purchased the item", "the kit I bought first", "which I purchased online"
    "item|items|thing|one|ones|first|online|in store|in-store"))
POSSESSION_RULES = (
    _r("pet_named", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}(?:have|got|adopted|rescued|own)\s+"
       rf"(?:a|an)\s+{_PET_ADJS}"
       rf"{SPECIES_RE}\s+(?:named|called)\s+{NAME}", f"{_S} has_pet {{name}}",
       "{name} is_a {species}", date_role="event", confidence=0.8),
    _r("and_pet_named", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}(?:have|got|adopted|rescued|own)\s+"
       rf".{{0,80}}?\band\s+"
       rf"(?:a|an)\s+{_PET_ADJS}{SPECIES_RE}\s+(?:named|called)\s+{NAME}",
       f"{_S} has_pet {{name}}", "{name} is_a {species}", date_role="event", confidence=0.75),
    _r("my_pet", rf"\bmy\s+{_PET_ADJS}{SPECIES_RE}(?:,\s*|\s+)(?:(?:named|called)\s+)?{NAME}",
       f"{_S} has_pet {{name}}", "{name} is_a {species}", confidence=0.75),
    # "Meet Toby, my puppy", "This is Luna, my new kitten": the pet introduced by name.
    _r("name_my_pet", rf"(?:\bmeet\s+|\bthis\s+is\s+|^){NAME},\s+my\s+{_PET_ADJS}{SPECIES_RE}"
       rf"(?![\w-]){_PET_END}", f"{_S} has_pet {{name}}", "{name} is_a {species}",
       confidence=0.75),  # not "Meet Sam, my dog walker"
    _r("pet_name_is", rf"\bmy\s+{_PET_ADJS}{SPECIES_RE}['’]s\s+name\s+is\s+{NAME}",
       f"{_S} has_pet {{name}}", "{name} is_a {species}", confidence=0.8),
    _r("pet", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}(?:have|own|adopted|rescued|got)\s+(?P<obj>{_PETS})"
       rf"(?:\s*(?:,|and)\s+(?P<obj2>{_PETS}))?{_PET_END}", f"{_S} has_pet {{obj}}",
       f"{_S} has_pet {{obj2}}", date_role="event", confidence=0.7, strip_possessive=True),
    _r("owns", rf"{WE}\s+{ADV}own\s+{OBJ}", f"{_S} owns {{obj}}", max_words=4,
       strip_possessive=True),
    _r("drives", rf"\bI\s+{ADV}drive\s+an?\s+{OBJ}", f"{_S} owns {{obj}}", max_words=4,
       confidence=0.65),
    _r("bought", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}(?:bought|purchased|got\s+myself)\s+{OBJ}",
       f"{_S} bought {{obj}}", date_role="event", max_words=4, confidence=0.7,
       strip_possessive=True, reject=_NO_PURCHASE),
)

_TRAVEL = r"(?P<verb>going|heading|flying|driving|traveling|travelling|off|moving|returning)"
_PLAN_REJECT_VERBS = (
    rf"(?!{ADV}(?:be|say|tell|ask|need|have|try|let|make\s+sure|admit|guess|assume|check|see|think|"
    r"do\s+it|do\s+that|answer|explain|repeat|start\s+by|"
    # "I'll always remember our camping trip" (no plan); "I'm going to make it for my family"
    # (it: whatever was shown; "make it to the party" is one)
    r"remember|forget|miss|cherish|treasure|make\s+it(?!\s+to\b))\b)"
)
# Groups that include the speaker: "we", "our team", "my wife and I".
_GROUP = (
    r"(?:\b(?:I|we)|\bour\s+(?:team|family|group|company|household|band|class)"
    r"|\bmy\s+[\w-]+\s+and\s+I)"
)
# A plan to plan, and nothing more ("I think I'll plan for the fall season": "plans to plan"
# was a fact of LongMemEval's); "I'll plan the party" keeps its object.
_NO_PLAN = frozenset(lex("plan|planning"))
PLAN_RULES = (
    _r("plan", rf"{WE}(?:['’]?m|\s+am|['’]re|\s+are|['’]ve|\s+have)?\s+{ADV}(?:planning|plan|"
       r"intend|intending|aiming|scheduled|signed\s+up|registered|enrolled|booked)\s+"
       rf"(?:on\s+|to\s+|for\s+){OBJ}", f"{_S} plans_to {{obj}}", policy="phrase",
       date_role="deadline", max_words=8, confidence=0.7, reject=_NO_PLAN),
    _r("my_plan", rf"\bmy\s+plan\s+is\s+to\s+{OBJ}", f"{_S} plans_to {{obj}}", policy="phrase",
       date_role="deadline", max_words=8, confidence=0.7),
    _r("travel", rf"{WE_ARE}\s+{ADV}{_TRAVEL}\s+(?:back\s+)?to\s+(?P<dest>(?:the\s+)?"
       r"(?-i:[A-Z]).{0,120})", f"{_S} plans_to {{verb_lemma}} to {{dest}}",
       date_role="deadline", confidence=0.7),
    _r("going_place", rf"{WE_ARE}\s+{ADV}{_TRAVEL}\s+to\s+(?P<obj>(?:the|a|an|my|our)\s+"
       r".{1,120})", f"{_S} plans_to {{verb_lemma}} to {{obj}}", policy="phrase",
       requires_date=True, date_role="deadline", max_words=5, confidence=0.65),
    _r("going_to", rf"{WE_ARE}\s+{ADV}(?:going\s+to|gonna)\s+{_NOT_DET}{_PLAN_REJECT_VERBS}"
       rf"(?=(?-i:[a-z])){OBJ}", f"{_S} plans_to {{obj}}", policy="phrase", requires_date=True,
       date_role="deadline", max_words=8, confidence=0.65),
    _r("will", rf"{WE}(?:['’]ll|\s+will|\s+shall)\s+{ADV}{_PLAN_REJECT_VERBS}{OBJ}",
       f"{_S} plans_to {{obj}}", policy="phrase", requires_date=True, date_role="deadline",
       max_words=8, confidence=0.6, reject=_NO_PLAN),
    _r("appointment", rf"\bI\s+have\s+(?:a|an|my)\s+(?P<obj>(?:[\w'’-]+\s+){{0,2}}?"
       rf"{alt(APPOINTMENTS)})(?![\w-])", f"{_S} plans_to {{obj}}", policy="phrase",
       requires_date=True, date_role="deadline", confidence=0.65),
    _r("promised_to", rf"{WE}\s+{ADV}(?:promised|pledged|vowed|swore)\s+to\s+{OBJ}",
       f"{_S} committed_to {{obj}}", policy="phrase", date_role="deadline", max_words=8,
       confidence=0.75),
    _r("promised_that", rf"{WE}\s+{ADV}(?:promised|pledged|vowed|swore)\s+(?:[\w'’]+\s+){{0,3}}?"
       rf"(?:that\s+)?(?:I|we)\s+(?:will|['’]ll)\s+{OBJ}", f"{_S} committed_to {{obj}}",
       policy="phrase", date_role="deadline", max_words=8, confidence=0.75),
    _r("committed", rf"(?:{I_AM}|{I_HAVE})\s+{ADV}(?:committed|agreed)\s+to\s+{OBJ}",
       f"{_S} committed_to {{obj}}", policy="phrase", date_role="deadline", max_words=8,
       confidence=0.7),
    _r("must", rf"\bI\s+{ADV}(?:need\s+to|have\s+to|must|got\s+to|gotta)\s+{OBJ}",
       f"{_S} committed_to {{obj}}", policy="phrase", requires_date=True,
       date_role="deadline", max_words=8, confidence=0.6),
    _r("decided", rf"{_GROUP}(?:['’]ve|\s+have)?\s+{ADV}(?:decided|chose|opted)\s+(?:to|that|on)\s+"
       rf"{OBJ}", f"{_S} decided {{obj}}", policy="phrase", date_role="event", max_words=8,
       confidence=0.75),
    _r("we_agreed", rf"(?!\bI\b){_GROUP}(?:['’]ve|\s+have)?\s+{ADV}(?:agreed|settled)\s+"
       rf"(?:to|on|that)\s+{OBJ}",
       f"{_S} decided {{obj}}", policy="phrase", date_role="event", max_words=8,
       confidence=0.7),
)

THIRD_PARTY_RULES = (
    _r("tp_lives", rf"{TP}(?:lives|is\s+living|is\s+based)\s+in\s+{OBJ}",
       "{name} lives_in {obj}", f"{_S} {{rel_pred}} {{name}}", policy="proper",
       date_role="since", confidence=0.7),
    _r("tp_works", rf"{TP}(?:works|is\s+working)\s+(?:at|for)\s+{OBJ}", "{name} works_at {obj}",
       f"{_S} {{rel_pred}} {{name}}", date_role="since", confidence=0.7),
    _r("tp_from", rf"{TP}is\s+(?:originally\s+)?from\s+{OBJ}", "{name} comes_from {obj}",
       f"{_S} {{rel_pred}} {{name}}", policy="proper", confidence=0.7),
    _r("tp_moved", rf"{TP}moved\s+to\s+{OBJ}", "{name} lives_in {obj}", "{name} moved_to {obj}",
       f"{_S} {{rel_pred}} {{name}}", policy="proper", date_role="event", confidence=0.7),
    _r("tp_joined", rf"{TP}{_JOIN}\s+{_CALLED}(?P<obj>{CAPS}){_ORG_END}", "{name} works_at {obj}",
       f"{_S} {{rel_pred}} {{name}}", date_role="since", confidence=0.65),
    _r("tp_join_as", rf"{TP}(?:{_JOIN}|(?:was|got)\s+hired\s+(?:at|by))\s+[^,.;]{{1,60}}?\s+as\s+"
       rf"(?:an?\s+|the\s+|their\s+)?{JOB}", "{name} job_title_is {job}",
       f"{_S} {{rel_pred}} {{name}}", date_role="since", confidence=0.65),
    _r("tp_quit", rf"{TP}quit\s+(?P<obj>{CAPS})(?![\w'’-])", "{name} works_at {obj}",
       negated=True, confidence=0.6),
    _r("tp_diet", rf"{TP}(?:went|is|has\s+gone|became|turned)\s+{ADV}(?:an?\s+)?{_DIET}",
       "{name} diet {diet}", f"{_S} {{rel_pred}} {{name}}", date_role="since", confidence=0.65),
    _r("tp_job", rf"{TP}is\s+{ADV}an?\s+{JOB}", "{name} job_title_is {job}",
       f"{_S} {{rel_pred}} {{name}}", confidence=0.65),
    _r("tp_job_works", rf"{TP}is\s+{ADV}an?\s+{JOB},?\s+(?:and\s+)?works\s+(?:at|for)\s+{OBJ}",
       "{name} works_at {obj}", date_role="since", confidence=0.6),
    _r("tp_age", rf"{TP}is\s+(?P<age>\d{{1,3}})(?:\s+years?\s+old)?(?=\s*(?:$|[,.!;]|and\b))",
       "{name} age_is {age}", f"{_S} {{rel_pred}} {{name}}", confidence=0.7),
    _r("tp_turned", rf"{TP}(?:just\s+)?turned\s+(?P<age>\d{{1,3}})(?![\w%])", "{name} age_is {age}",
       f"{_S} {{rel_pred}} {{name}}", date_role="since", confidence=0.7),
    _r("tp_likes", rf"{TP}(?:loves|likes|enjoys|adores|is\s+(?:obsessed\s+with|into|crazy\s+about|"
       rf"passionate\s+about|an?\s+(?:big\s+|huge\s+)?fan\s+of))\s+{OBJ}", "{name} likes {obj}",
       f"{_S} {{rel_pred}} {{name}}", policy="pref", split_and=True, confidence=0.6),
    _r("tp_married", rf"{TP}is\s+married\s+to\s+{NAME2}", "{name} married_to {name2}",
       f"{_S} {{rel_pred}} {{name}}", confidence=0.7),
    _r("who_lives", rf"{NAME},?\s+who\s+{ADV}(?:lives|is\s+living)\s+in\s+{OBJ}",
       "{name} lives_in {obj}", policy="proper", confidence=0.65),
    _r("who_works", rf"{NAME},?\s+who\s+{ADV}works\s+(?:at|for)\s+{OBJ}", "{name} works_at {obj}",
       confidence=0.65),
    _r("tp_birthday", rf"^{NAME}['’]s\s+birthday\s+is\s+(?:on\s+)?{DATE_SURFACE}",
       "{name} born_on {obj}", policy="date", confidence=0.75),
)

_NO = r"(?:no\s+longer|don['’]?t|do\s+not|never)"
# "I haven't read", "I've never watched", "I didn't read" (a title: ``CONSUMED_RULES``).
_NOT_DONE = (rf"\bI(?:['’]ve|['’]d)?\s+(?:(?:have|had)n['’]?t|(?:have|had)\s+not|"
             rf"(?:have\s+|had\s+)?never|did(?:n['’]?t|\s+not))\s+{ADV}")
NEGATION_RULES = (
    _r("not_live", rf"\bI\s+{_NO}\s+(?:live|reside)\s+in\s+{OBJ}", f"{_S} lives_in {{obj}}",
       policy="proper", negated=True),
    _r("not_living", rf"{I_AM}\s+(?:no\s+longer|not)\s+(?:living|based)\s+in\s+{OBJ}",
       f"{_S} lives_in {{obj}}", policy="proper", negated=True),
    _r("not_work", rf"\bI\s+{_NO}\s+work\s+(?:at|for)\s+{OBJ}", f"{_S} works_at {{obj}}",
       negated=True),
    _r("not_working", rf"{I_AM}\s+(?:no\s+longer|not)\s+(?:working|employed)\s+(?:at|for|by)\s+"
       rf"{OBJ}", f"{_S} works_at {{obj}}", negated=True),
    _r("not_job", rf"{I_AM}\s+no\s+longer\s+an?\s+{JOB}", f"{_S} job_title_is {{job}}",
       negated=True),
    _r("not_married", rf"{I_AM}\s+(?:no\s+longer|not)\s+married\s+to\s+{NAME}",
       f"{_S} married_to {{name}}", negated=True),
    _r("not_dating", rf"{I_AM}\s+(?:no\s+longer|not)\s+(?:dating|with)\s+{NAME}",
       f"{_S} has_partner {{name}}", negated=True),
    _r("not_like", rf"\bI\s+{ADV}(?:don['’]?t|do\s+not|never)\s+(?:really\s+)?(?:like|enjoy)\s+"
       rf"{OBJ}", f"{_S} dislikes {{obj}}", policy="pref", split_and=True, confidence=0.65),
    _r("cant_stand", rf"\bI\s+{ADV}(?:can['’]?t|cannot|can\s+not)\s+stand\s+{OBJ}",
       f"{_S} dislikes {{obj}}", policy="pref", split_and=True, confidence=0.7),
    _r("not_fan", rf"{I_AM}\s+not\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into)\s+{OBJ}",
       f"{_S} dislikes {{obj}}", policy="pref", split_and=True, confidence=0.65),
    _r("not_play", rf"\bI\s+{ADV}{_NO}\s+(?:really\s+)?play\s+{_NOT_PLAYED}(?:the\s+)?{OBJ}",
       f"{_S} plays {{obj}}", max_words=3, split_and=True, negated=True, reject=_NO_PLAY),
    _r("not_read", rf"{_NOT_DONE}{_READ}{_TITLES}", f"{_S} read {{obj}}", policy="phrase",
       split_and=True, max_words=8, negated=True),
    _r("not_watched", rf"{_NOT_DONE}{_WATCH}{_TITLES}", f"{_S} watched {{obj}}",
       policy="phrase", split_and=True, max_words=8, negated=True),
    _r("decided_not", rf"{WE}(?:['’]ve|\s+have)?\s+{ADV}decided\s+(?P<obj>not\s+to\s+.{{1,160}})",
       f"{_S} decided {{obj}}", policy="phrase", date_role="event", max_words=8),
)

POSITIVE_RULES: tuple[Rule, ...] = (
    IDENTITY_RULES + LOCATION_RULES + WORK_RULES + ACTIVITY_RULES + CONSUMED_RULES
    + PREFERENCE_RULES
    + RELATION_RULES
    + POSSESSION_RULES + PLAN_RULES + THIRD_PARTY_RULES
)


@functools.cache
def _gate_scan() -> GateScan:
    return GateScan(r.gate for r in POSITIVE_RULES + NEGATION_RULES)


@functools.cache
def _gate_index(negated: bool) -> tuple[tuple[Rule, ...], tuple[int, ...],
                                        dict[str, tuple[int, ...]]]:
    """A rule table (negated or positive), the positions of its always-run rules, and the
    positions of the rules each gate string opens."""
    table = NEGATION_RULES if negated else POSITIVE_RULES
    by_gate: dict[str, list[int]] = {}
    for i, rule in enumerate(table):
        for gate in rule.gate:
            by_gate.setdefault(gate, []).append(i)
    return (table, tuple(i for i, rule in enumerate(table) if not rule.gate),
            {gate: tuple(found) for gate, found in by_gate.items()})


def rules_for(negated: bool, present: frozenset[str] | None) -> Sequence[Rule]:
    """The rules of the negated or the positive table that may match a clause holding the
    gate strings ``present`` (``present_gates``), in table order: those whose gate is open
    (``lexicon.gate_open(rule.gate, present)``: a rule none of whose gate strings is in the
    clause cannot match it), found from the gate strings instead of asking each of the ~120
    rules (a few index lookups a clause)."""
    table, always, by_gate = _gate_index(negated)
    if present is None:
        return table
    picked = set(always)
    for gate in present:
        picked.update(by_gate.get(gate, ()))
    return [table[i] for i in sorted(picked)]


def present_gates(clause: str) -> frozenset[str] | None:
    """The gate strings of the rule table found in ``clause`` (None when it is not ASCII:
    case folding beyond ASCII is left to the regexes themselves)."""
    return _gate_scan().present(clause.lower()) if clause.isascii() else None
