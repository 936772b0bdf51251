"""Word lists of the heuristic extractor and the regex pieces built from them.

Data for ``memory_core.extraction.rules``: lowercase phrases, turned into alternations by
``alt``, and the shared building blocks (names, adverbs, "I am", objects). Extend a list
here to widen every rule that uses it.
"""

from __future__ import annotations

import re
import re._parser as sre_parse  # type: ignore[import-not-found]  # loaded by ``re`` already
from collections.abc import Iterable
from re._constants import (  # type: ignore[import-not-found]
    ATOMIC_GROUP,
    BRANCH,
    LITERAL,
    MAX_REPEAT,
    MIN_REPEAT,
    POSSESSIVE_REPEAT,
    SUBPATTERN,
)
from typing import Any

from memory_core.model.predicates import RELATION_OF


class LazyRegex:
    """A regex compiled on first use (``.re``): importing the extractor compiles nothing."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def re(self) -> re.Pattern[str]:
        if self._compiled is None:  # a race compiles twice, harmlessly
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled


def lex(text: str) -> tuple[str, ...]:
    """'a|b c|d' -> ('a', 'b c', 'd')."""
    return tuple(w.strip() for w in text.split("|") if w.strip())


JOBS = lex(
    "nurse practitioner|registered nurse|nurse|teacher|professor|lecturer|software engineer|"
    "software developer|web developer|game developer|developer|programmer|data scientist|"
    "data analyst|engineer|scientist|researcher|doctor|physician|surgeon|dentist|pharmacist|"
    "therapist|counselor|counsellor|psychologist|psychiatrist|social worker|lawyer|attorney|"
    "paralegal|accountant|architect|graphic designer|ux designer|designer|illustrator|"
    "animator|artist|painter|photographer|musician|singer|songwriter|writer|author|"
    "journalist|editor|chef|cook|baker|barista|bartender|waiter|waitress|cashier|pilot|"
    "flight attendant|firefighter|police officer|cop|paramedic|electrician|plumber|"
    "carpenter|mechanic|farmer|veterinarian|vet|librarian|consultant|analyst|"
    "product manager|project manager|manager|entrepreneur|ceo|cto|freelancer|translator|"
    "mathematician|economist|banker|realtor|real estate agent|receptionist|secretary|"
    "sysadmin|tutor|coach|personal trainer|dancer|actor|actress|comedian|filmmaker|intern|"
    "caregiver|nanny|midwife|soldier|youtuber|streamer|podcaster|social media manager|"
    "stay-at-home mom|stay-at-home dad|stay-at-home parent|student|grad student|phd student|"
    "team lead|tech lead|lead|director|trainer|server|sous chef|head chef|line cook|"
    "engineering manager|supervisor|coordinator|specialist|administrator"
)
DIETS = lex(
    "vegetarian|vegan|pescatarian|pescetarian|keto|paleo|plant-based|gluten-free|dairy-free|"
    "flexitarian|carnivore|whole30|low-carb|raw vegan|lacto-vegetarian|ovo-vegetarian"
)
JOB_MODIFIER_BLOCK = lex(
    "of|the|a|an|and|or|my|your|not|big|huge|fan|bit|little|lot|kind|sort|such|total|really|"
    "very|good|bad|great|terrible|proud|former|ex|aspiring|wannabe|future|retired|failed|"
    "frustrated|born|natural|better|worse|terrible|horrible|decent|amateur|hobby|wannabe"
)
NATIONALITIES = lex(
    "american|british|english|scottish|welsh|irish|canadian|mexican|brazilian|argentinian|"
    "argentine|chilean|colombian|peruvian|venezuelan|cuban|french|german|italian|spanish|"
    "portuguese|dutch|belgian|swiss|austrian|swedish|norwegian|danish|finnish|icelandic|"
    "polish|czech|slovak|hungarian|romanian|bulgarian|greek|turkish|russian|ukrainian|"
    "serbian|croatian|bosnian|slovenian|albanian|lithuanian|latvian|estonian|israeli|"
    "palestinian|lebanese|syrian|iraqi|iranian|egyptian|moroccan|algerian|tunisian|"
    "nigerian|ghanaian|kenyan|ethiopian|somali|south african|indian|pakistani|bangladeshi|"
    "sri lankan|nepali|chinese|japanese|korean|south korean|vietnamese|thai|filipino|"
    "filipina|indonesian|malaysian|singaporean|australian|new zealander|saudi|emirati|"
    "jamaican|haitian|puerto rican|dominican|taiwanese"
)
LANGUAGES = lex(
    "english|spanish|french|german|italian|portuguese|dutch|swedish|norwegian|danish|"
    "finnish|polish|czech|russian|ukrainian|greek|turkish|arabic|hebrew|persian|farsi|hindi|"
    "urdu|bengali|punjabi|tamil|telugu|mandarin|cantonese|chinese|japanese|korean|"
    "vietnamese|thai|indonesian|malay|tagalog|swahili|romanian|hungarian|serbian|croatian|"
    "bulgarian|catalan|basque|irish|welsh|latin|esperanto|sign language|asl|bsl|"
    "american sign language|yoruba|igbo|amharic|somali"
)
GENDERS = lex(
    "trans woman|trans man|trans person|trans girl|trans guy|transgender woman|"
    "transgender man|transgender person|non-binary person|nonbinary person|non-binary|"
    "nonbinary|enby|genderqueer|genderfluid|gender-fluid|agender|cis woman|cis man|"
    "cisgender woman|cisgender man|two-spirit|transgender|trans|woman|man"
)
# The label of an unnamed relative ("my mum" -> "user's mom") and who "he"/"she" can be.
REL_CANONICAL = {
    "mom": "mother", "mum": "mother", "mommy": "mother", "dad": "father", "daddy": "father",
    "hubby": "husband", "sis": "sister", "gf": "girlfriend", "bf": "boyfriend",
    "fiancé": "fiance", "fiancée": "fiancee", "co-worker": "coworker", "grandmother": "grandma",
    "granny": "grandma", "nana": "grandma", "grandfather": "grandpa", "grandad": "grandpa",
    "granddad": "grandpa", "step-sister": "stepsister", "step-brother": "stepbrother",
    "step-son": "stepson", "step-daughter": "stepdaughter", "bestie": "best friend",
    "bff": "best friend", "co-founder": "cofounder", "auntie": "aunt",
}  # fmt: skip
_MALE = lex(
    "brother|twin brother|half-brother|stepbrother|husband|boyfriend|fiance|son|stepson|father|"
    "stepdad|stepfather|uncle|grandpa|grandson|nephew|father-in-law|brother-in-law|son-in-law"
)
_FEMALE = lex(
    "sister|twin sister|half-sister|stepsister|wife|girlfriend|fiancee|daughter|stepdaughter|"
    "mother|stepmom|stepmother|aunt|grandma|granddaughter|niece|mother-in-law|sister-in-law|"
    "daughter-in-law"
)
REL_GENDER = {**{w: "he" for w in _MALE}, **{w: "she" for w in _FEMALE}}


def rel_label(word: str) -> str:
    """The canonical relation word: "Mum" -> "mother", "sis" -> "sister"."""
    low = " ".join(word.lower().split())
    return REL_CANONICAL.get(low, low)
REL_ADJ = lex(
    "older|younger|big|little|baby|twin|best|oldest|youngest|eldest|middle|close|good|old|"
    "childhood|dear|new|lovely|amazing|awesome|wonderful|sweet|beautiful|favorite|favourite"
)
SPECIES = lex(
    "dog|puppy|pup|cat|kitten|kitty|hamster|guinea pig|rabbit|bunny|parrot|budgie|bird|"
    "cockatiel|fish|goldfish|betta|turtle|tortoise|horse|pony|snake|lizard|gecko|iguana|"
    "ferret|chinchilla|hedgehog|rat|golden retriever|labrador|lab|poodle|beagle|corgi|husky|"
    "pug|dachshund|german shepherd|chihuahua|bulldog|terrier|retriever|shih tzu|pit bull|"
    "border collie|maine coon|tabby"
)
PET_ADJ = lex("new|little|cute|sweet|big|old|young|rescue|adorable|fluffy|tiny|senior|lovely")
EVENTS = lex(
    "concert|gig|show|festival|conference|convention|meetup|party|wedding|funeral|"
    "baby shower|graduation|ceremony|game|match|race|marathon|half marathon|parade|rally|"
    "protest|workshop|seminar|class|lecture|talk|webinar|hackathon|exhibition|exhibit|"
    "support group|book club|retreat|camp|tournament|competition|fair|carnival|play|"
    "musical|opera|ballet|recital|open mic|poetry reading|book signing|fundraiser|event|"
    "gala|reunion|picnic|barbecue|bbq|potluck|game night|trivia night|comedy show|"
    "screening|premiere|expo|summit|symposium|service|mass|meeting|meeting|pride"
)
VENUES = lex(
    "museum|art museum|zoo|aquarium|art gallery|gallery|beach|national park|theme park|"
    "amusement park|botanical garden|botanical gardens|lake|mountains|countryside"
)
# A quote holding one of these is speech (quoted words of someone), not a title: the rule gate
# that blocks quoted speech (heuristic) and the titles an object keeps whole (text) agree.
SPEECH_WORDS = r"\b(?i:I|I['’]m|my|me|we|our)\b"
# A quoted title's words inside its quotes: a capital or a digit first, at most 80
# characters, no comma or stop last (text._QUOTED_TITLE, rules' named titles).
TITLE_BODY = r"(?-i:[A-Z0-9])[^\"“”\n]{0,79}?(?<![,.;:!?])"
# What one practises rather than plays ("I'm doing kickboxing", "I practice yoga").
PRACTICES = lex(
    "yoga|hot yoga|aerial yoga|power yoga|vinyasa|vinyasa yoga|hatha yoga|pilates|kickboxing|"
    "boxing|karate|taekwondo|judo|jiu-jitsu|jiu jitsu|brazilian jiu-jitsu|bjj|aikido|kung fu|"
    "tai chi|muay thai|mma|martial arts|krav maga|capoeira|fencing|archery|crossfit|meditation|"
    "ballet|parkour|calisthenics|weightlifting|powerlifting|rock climbing|bouldering|zumba"
)
APPOINTMENTS = lex(
    "appointment|interview|job interview|exam|test|surgery|flight|date|recital|"
    "presentation|check-up|checkup|deadline|audition|performance"
)
NUMBER_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "a": "1", "an": "1",
}  # fmt: skip
VERB_LEMMA = {
    "going": "go", "heading": "head", "flying": "fly", "driving": "drive", "off": "go",
    "traveling": "travel", "travelling": "travel", "moving": "move", "returning": "return",
}  # fmt: skip
MONTHS = lex(
    "january|february|march|april|may|june|july|august|september|october|november|december"
)
WEEKDAYS = lex("monday|tuesday|wednesday|thursday|friday|saturday|sunday")
# Capitalised words that are not person names in the positions where a name is expected.
NAME_STOP = frozenset(
    [
        *MONTHS,
        *WEEKDAYS,
        *NATIONALITIES,
        *LANGUAGES,
        *lex(
            "i|i'm|im|me|my|mine|you|your|he|she|it|we|they|him|her|them|us|our|their|his|its|"
            "the|this|that|these|those|a|an|and|but|or|so|also|well|oh|ok|okay|yes|yeah|no|"
            "hey|hi|hello|thanks|sorry|lol|god|today|tomorrow|yesterday|tonight|everyone|"
            "congrats|congratulations|cheers|welcome|bye|goodbye|looky|look|listen|same|"
            "try|click|start|stop|sign|done|wrong|good|come|read|check|tap|apply|register|"
            "subscribe|donate|shop|order|vote|reply|join|download|enter|details|info|more|"
            "everybody|nobody|someone|somebody|anyone|christmas|easter|halloween|thanksgiving|"
            "covid|university|college|school|just|really|actually|honestly|anyway|here|there|"
            "what|who|why|how|when|where|which|if|then|now|not|never|always|still|too|very|"
            "catholic|christian|muslim|jewish|buddhist|hindu|atheist|gay|lesbian|bi|straight|"
            "single|married|divorced|pregnant|sick|happy|sad|great|fine|busy|home|back|mr|mrs|"
            "ms|dr|sir|mom|dad|mum|mama|papa"
        ),
    ]
)


def alt(words: tuple[str, ...] | frozenset[str]) -> str:
    """A regex alternation of phrases, longest first, any whitespace between words."""
    ordered = sorted(words, key=len, reverse=True)
    return "(?:" + "|".join(r"\s+".join(re.escape(p) for p in w.split()) for w in ordered) + ")"


# --- regex building blocks -------------------------------------------------------------
_UP = "A-ZÀ-ÖØ-Þ"
_LO = "a-zß-öø-ÿ"
NAME_WORD = rf"[{_UP}](?:[{_LO}]+(?:[{_UP}][{_LO}]+)?|['’][{_UP}][{_LO}]+)(?:-[{_UP}][{_LO}]+)?"
NAME_BODY = rf"(?-i:{NAME_WORD}(?:\s+{NAME_WORD})?)(?![\w-])(?!['’](?![sS]\b))"
NAME = rf"(?P<name>{NAME_BODY})"
NAME2 = rf"(?P<name2>{NAME_BODY})"
ADV = (
    r"(?:(?:currently|now|still|also|actually|really|just|recently|finally|totally|"
    r"absolutely|genuinely|honestly|officially|already|truly|definitely|seriously|literally|"
    r"originally|even|always|mostly|usually|kinda|kind\s+of|sort\s+of|pretty\s+much|"
    r"happily|proudly|so|very)\s+){0,3}"
)
I_AM = r"\bI(?:['’]?m|\s+am)"
I_HAVE = r"\bI(?:['’]ve|\s+have)"
WE = r"\b(?:I|we)"
WE_ARE = r"\b(?:I(?:['’]?m|\s+am)|we(?:['’]re|\s+are))"
WE_HAVE = r"\b(?:I|we)(?:['’]ve|\s+have)"
OBJ = r"(?P<obj>.{1,200})"
REL = rf"(?P<rel>{alt(tuple(RELATION_OF))})"
REL_ADJS = rf"(?:{alt(REL_ADJ)}\s+){{0,2}}"
JOB_MOD = rf"(?:(?!{alt(JOB_MODIFIER_BLOCK)}\b)[a-z][\w-]*\s+){{0,3}}?"
JOB = rf"(?P<job>{JOB_MOD}{alt(JOBS)})(?![\w'’-])"
SPECIES_RE = rf"(?P<species>{alt(SPECIES)})"
END = r"(?=\s*(?:$|[,.!;:)]|and\b|but\b|so\b|too\b|btw\b|lol\b|now\b|who\b|myself\b|since\b|for\b))"
MONTH_RE = alt(MONTHS)
DATE_SURFACE_BARE = (
    rf"(?:{MONTH_RE}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+(?:19|20)\d\d)?"
    rf"|(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH_RE}(?:,?\s+(?:19|20)\d\d)?"
    rf"|(?:19|20)\d\d)(?![\w])"
)
DATE_SURFACE = rf"(?P<obj>{DATE_SURFACE_BARE})"
# A third party at the start of a clause: "Anna ...", "my sister Anna ...", "my wife, Maria, ...",
# "my brother ..."
TP = (
    rf"^(?:my\s+{REL_ADJS}{REL}(?:(?:\s+|,\s*(?={NAME_WORD},))(?=(?-i:{NAME_WORD})))?)?"
    rf"{NAME}?,?\s+{ADV}"
)  # without a name ("my brother lives in ..."), the subject is "user's brother"
# A run of capitalised words: an organisation named without a cue ("I joined Stripe").
CAPS = r"(?-i:[A-Z])[\w&'’.-]*(?:\s+(?-i:[A-Z])[\w&'’.-]*){0,3}"


# --- rule gates ----------------------------------------------------------------------------
MIN_GATE_CHARS = 3


class GateScan:
    """Which gate strings of a rule table occur in a lowercased clause, in one regex pass.

    A lookahead at every position finds the longest gate string starting there; the gate
    strings that are prefixes of it start there too ("lives" -> "live" as well).
    """

    def __init__(self, gates: Iterable[frozenset[str]]) -> None:
        strings = sorted({g for gate in gates for g in gate}, key=len, reverse=True)
        self._regex = LazyRegex("(?=(" + "|".join(map(re.escape, strings)) + "))")
        self._prefixes = {f: frozenset(g for g in strings if f.startswith(g)) for f in strings}

    def present(self, lowered: str) -> frozenset[str]:
        found: set[str] = set()
        for m in self._regex.re.finditer(lowered):
            found |= self._prefixes[m.group(1)]
        return frozenset(found)


def gate_open(gate: frozenset[str], present: frozenset[str] | None) -> bool:
    """False when a rule whose match always contains one of ``gate`` cannot match a clause
    holding only the gate strings ``present`` (``GateScan.present``; None: unknown, and an
    empty gate: the rule always runs)."""
    return present is None or not gate or not gate.isdisjoint(present)


def required_literals(source: str) -> frozenset[str]:
    """Lowercase strings of which every match of ``source`` contains at least one (empty:
    no such set is known). A rule whose gate misses the clause cannot match: skipping it
    saves the regex run. Read from the parsed regex: literal runs of 3+ characters in the
    mandatory parts, alternatives of a branch, groups and repeats of at least one."""
    return _required(list(sre_parse.parse(source, re.IGNORECASE))) or frozenset()


def _required(items: list[Any]) -> frozenset[str] | None:
    candidates: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= MIN_GATE_CHARS:
            candidates.append(frozenset({"".join(run).lower()}))
        run.clear()

    for op, av in items:
        if op is LITERAL:
            run.append(chr(av))
            continue
        flush()
        found: frozenset[str] | None = None
        if op is SUBPATTERN:
            found = _required(list(av[-1]))
        elif op is ATOMIC_GROUP:
            found = _required(list(av))
        elif op is BRANCH:
            alts = [_required(list(b)) for b in av[1]]
            found = frozenset().union(*alts) if alts and all(alts) else None  # type: ignore[arg-type]
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT) and av[0] >= 1:
            found = _required(list(av[2]))
        if found:
            candidates.append(found)
    flush()
    # The most selective: the set whose shortest string is longest, then the smallest set.
    return max(candidates, key=lambda c: (min(map(len, c)), -len(c)), default=None)
