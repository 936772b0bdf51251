"""What a query asks about, read from its words: whose fact, and which predicates.

Pure functions over a fixed table (no database). ``read_intent("Which city do I live in
now?")`` says: the user's own (``I``), the predicates ``lives_in`` (and, weaker,
``moved_to``). A relation word after a possessive ("my sister",
"my dog", "Luis's brother") names a relation predicate (``has_sibling``, ``has_pet``): the
facts channel looks up who that is for the owner (the user, or the entity the query names)
and makes them the subject ("where does my sister live" asks about the sister). "What does
X do?" asks for a job.

The table names predicates of ``memory_core.model.predicates``; a cue for a predicate that
no belief uses simply finds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from memory_core.model.hygiene import ASSISTANT, USER
from memory_core.model.predicates import RELATION_OF
from memory_core.recall.query import MONTHS, query_terms

_WORD_RE = re.compile(r"'s\b|\w+")
_POSSESSIVE_S_RE = re.compile(r"(\w)'s\b")

FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "im", "ive", "id"})
POSSESSIVES = frozenset({"my", "our", "'s"})  # "'s": "Luis's brother"
# A secondary predicate of a cue counts this much (the first one counts 1).
SECONDARY = 0.6
# "where" alone hints at a place; any other cue outweighs it.
WHERE_WEIGHT = 0.5

# (cue words, predicates best first). A word may appear in several rows; the weights merge
# by maximum.
_CUES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("live lives living lived reside resides residing home city town based hometown "
     "neighborhood neighbourhood country", ("lives_in", "moved_to")),
    ("move moved moving relocate relocated relocating", ("moved_to", "lives_in")),
    ("work works working worked employer employed company office firm", ("works_at",
                                                                          "job_title_is")),
    ("job occupation profession role title career position", ("job_title_is", "works_at")),
    ("name named called", ("name_is", "preferred_name_is")),
    ("nickname call", ("preferred_name_is", "name_is")),
    ("old age", ("age_is", "born_on")),
    ("born birthday birth", ("born_on", "born_in")),
    ("grew origin originally hometown", ("comes_from", "born_in")),
    ("nationality citizen citizenship", ("nationality_is",)),
    ("speak speaks language languages", ("speaks", "learning")),
    ("learn learning learned studying", ("learning", "studies")),
    # Only the verb: "instruments", "sports", "games" are the kind of value asked for
    # (``Intent.kind``: a taste of another kind does not answer), and tastes are no second
    # predicate here (LoCoMo: "What instruments does Melanie play?" showed her 8 tastes).
    ("play plays playing played", ("plays",)),
    ("practice practices practiced practise practises practised practicing practising martial",
     ("practices", "plays")),
    ("exercise exercises workout workouts", ("practices", "plays")),
    # The verb again: "books", "movies", "shows" are the kind of value asked for.
    ("read reads reading reread", ("read",)),
    ("watch watches watched watching rewatched seen", ("watched",)),
    ("study studies studied school university college degree major", ("studies_at", "studies",
                                                                      "graduated_from")),
    ("graduate graduated", ("graduated_from",)),
    ("like likes love loves enjoy enjoys hobby hobbies fan into", ("likes", "favorite",
                                                                   "prefers")),
    ("favorite favourite", ("favorite", "likes")),
    ("dislike dislikes hate hates avoid", ("dislikes",)),
    ("prefer prefers preference preferences drink drinks coffee tea milk", ("prefers",
                                                                           "remembers")),
    ("diet eat eats eating food vegetarian vegan pescatarian meat allergic allergy",
     ("diet", "prefers", "is_a")),
    ("pronouns", ("pronouns_are",)),
    ("gender", ("gender_identity_is",)),
    ("plan plans planning planned going trip upcoming next", ("plans_to", "committed_to")),
    ("promise promised commitment deadline due", ("committed_to", "plans_to")),
    ("remind reminder", ("reminder",)),
    ("decide decided decision", ("decided",)),
    ("visit visited travel travelled traveled trip been", ("visited",)),
    ("attend attended event concert conference wedding participate participated participating",
     ("attended",)),
    ("own owns drive drives car house", ("owns", "bought")),
    ("buy bought purchase purchased", ("bought", "owns")),
    ("project projects building", ("works_on",)),
    ("remember", ("remembers",)),
    ("married marry marrying spouse wife husband", ("married_to", "has_partner")),
    ("dating date dates seeing partner girlfriend boyfriend fiance fiancee engaged together",
     ("has_partner", "married_to")),
    ("sibling siblings sister sisters brother brothers", ("has_sibling",)),
    ("kids children child son sons daughter daughters", ("has_child", "child_count_is")),
    ("parents mother mom mum father dad", ("has_parent",)),
    ("friend friends", ("friend_of",)),
    ("colleague colleagues coworker coworkers boss manager teammate", ("colleague_of",)),
    ("pet pets dog dogs cat cats", ("has_pet",)),
)

# Relation words beyond the extractor's (``model.predicates.RELATION_OF``, read below):
# (words, the hub's predicate naming that relation).
_RELATIONS: tuple[tuple[str, str], ...] = (
    ("sisters brothers siblings", "has_sibling"),
    ("parent parents", "has_parent"),
    ("sons daughters children kids", "has_child"),
    ("friends", "friend_of"),
    ("colleagues coworkers", "colleague_of"),
    ("dog dogs cat cats pet pets puppy kitten", "has_pet"),
)


def _table(rows: tuple[tuple[str, tuple[str, ...]], ...]) -> Mapping[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for words, predicates in rows:
        for word in words.split():
            weights = out.setdefault(word, {})
            for i, predicate in enumerate(predicates):
                weight = 1.0 if i == 0 else SECONDARY
                weights[predicate] = max(weights.get(predicate, 0.0), weight)
    return MappingProxyType(out)


CUES = _table(_CUES)
# One vocabulary with the extractor (``model.predicates.RELATION_OF``): every one-word
# relation it stores a belief from ("my grandson Eli", "my stepdad") is one a query can ask
# about (before session 12 this module's own table missed 32 of them, and "where does my
# grandson live?" was read as asking where the user lives); ``_RELATIONS`` adds the plurals
# and the pets.
RELATIONS: Mapping[str, str] = MappingProxyType({
    **{word: predicate for word, predicate in RELATION_OF.items() if word.isalpha()},
    **{word: predicate for words, predicate in _RELATIONS for word in words.split()}})
# Words for a child that, after "as (a)" or "was (a)"/"were", say when ("items John had as
# a child", "when I was a kid"), not that someone has a child.
_CHILDHOOD = frozenset({"child", "children", "kid", "kids", "boy", "girl", "teen",
                        "teenager", "toddler"})
# Month words: the names and 3-letter forms a query's time cue reads, and "sept".
_MONTH_NAMES = frozenset(MONTHS) | {"sept"}
# Auxiliaries that end a "what/which ..." phrase.
_VERB_WORDS = frozenset({
    "is", "are", "was", "were", "am", "be", "been", "do", "does", "did", "has", "have", "had",
    "can", "could", "will", "would", "should", "shall", "may", "might", "must", "'s"})
# Words that place the asked value in time, or only say which kind of value is asked.
_TIME_WORDS = frozenset({
    "now", "currently", "current", "today", "yesterday", "tomorrow", "recently", "recent",
    "lately", "ago", "last", "first", "week", "weekend", "month", "year", "day", "morning",
    "evening", "night", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "kind", "type", "sort",
    # How often, which says nothing of the value ("which country has Tim visited most
    # frequently?" asks for every country he visited).
    "often", "frequently", "usually", "regularly", "most"})


@dataclass(frozen=True)
class Intent:
    """What a query asks about.

    ``first_person``: the query speaks of the user (I, me, my). ``predicates``: predicate
    name -> weight in (0, 1]. ``relations``: relation predicates named after a possessive
    ("my sister", "Luis's brother" -> ``has_sibling``): their objects, for the user or the
    entities the query names, are subjects of the query. ``terms``: its content words
    (``query.query_terms``), to match a belief's object ("call the plumber").
    """

    first_person: bool = False
    predicates: Mapping[str, float] = field(default_factory=dict)
    relations: tuple[str, ...] = ()
    terms: frozenset[str] = frozenset()
    relation_words: frozenset[str] = frozenset()  # "son" of "my son": names "user's son"
    # The content words that neither ask for a predicate nor name a time: what the query
    # says of the value it wants ("thrift store" of "what did I buy from a thrift store?").
    # Empty: the query leaves the slot open ("what does Lena like?", "what did John attend
    # in March?"). Entity names are among them; ``facts`` leaves those out.
    specifics: frozenset[str] = frozenset()
    # Whose turns answer it (``whose_words``): "user", "assistant" or neither.
    whose: frozenset[str] = frozenset()
    # The kind of value it asks for: its stemmed content words between "what"/"which" and
    # the verb ("books" of "what kind of books does Nate enjoy?"; after "what are some", up
    # to a clause, a preposition or a name: "foods" of "what are some foods that Audrey
    # likes?"), less those asking for a predicate ("hobbies" asks for ``likes`` itself;
    # "foods" names a kind of taste too, ``_KIND_CUES``) or naming a time. ``facts`` sets
    # the predicate's own kind aside ("cities" of visited: ``facts.OWN_KINDS``).
    kind: frozenset[str] = frozenset()


def words(text: str) -> list[str]:
    """Case-folded word tokens; a possessive "'s" is a token of its own ("luis", "'s"),
    other apostrophes are dropped ("I'm" -> "im")."""
    text = _POSSESSIVE_S_RE.sub(r"\1 's", text.casefold().replace("’", "'"))
    return [w if w == "'s" else w.replace("'", "") for w in _WORD_RE.findall(text)]


def read_intent(text: str) -> Intent:
    """The intent of query ``text`` (see ``Intent``)."""
    toks = words(text)
    first_person = any(w in FIRST_PERSON for w in toks)
    predicates: dict[str, float] = {}
    relations: list[str] = []
    relation_words: set[str] = set()
    for i, word in enumerate(toks):
        sense = _OTHER_SENSE.get(word)
        if sense is not None and sense(toks, i):  # a cue or relation word meaning else
            continue
        for predicate, weight in CUES.get(word, {}).items():
            predicates[predicate] = max(predicates.get(predicate, 0.0), weight)
        relation = RELATIONS.get(word)
        if relation is not None:
            # The relation itself is asked about too ("who is my sister?").
            predicates[relation] = max(predicates.get(relation, 0.0), SECONDARY)
            if any(w in POSSESSIVES for w in toks[max(0, i - 3):i]):
                relations.append(relation)
                relation_words.add(word)
    if any(_works_on(toks, i) for i, w in enumerate(toks) if w in _WORK_WORDS):
        predicates["works_on"] = 1.0
    if _asks_what_one_does(toks):
        # "what does Luis do?", "what does my son do for work?", "... for a living?"
        predicates.pop("lives_in", None)
        predicates.pop("moved_to", None)
        for predicate, weight in (("job_title_is", 1.0), ("works_at", SECONDARY)):
            predicates[predicate] = max(predicates.get(predicate, 0.0), weight)
    if "where" in toks and not any(p in predicates for p in ("lives_in", "works_at",
                                                             "moved_to", "visited")):
        predicates["lives_in"] = WHERE_WEIGHT
    terms = frozenset(stem(t) for t in query_terms(text))
    # The words saying something of the value: of its kind, or else which one.
    said = frozenset(t for t in terms if not _asks_or_dates(t))
    kind = _value_kind(toks, text)
    return Intent(first_person, MappingProxyType(predicates), tuple(dict.fromkeys(relations)),
                  terms, frozenset(relation_words), said - kind, whose_words(text),
                  (said | _KIND_CUES) & kind)


def whose_words(text: str) -> frozenset[str]:
    """Whose turns answer query ``text`` in a chat of the user and the assistant:
    ``{"assistant"}`` when it asks what the assistant said ("the trail you recommended", "did
    you say", "in our previous conversation ... remind me"), else ``{"user"}`` when it speaks
    of the user (I, me, my: LongMemEval, 48 questions, all first person: the evidence of every
    one but the 8 that ask what the assistant said is the user's own turns, and 7 of those 8
    the assistant's), else nothing."""
    toks = words(text)
    said = any(w == "you" and toks[i + 1:i + 2] and toks[i + 1] in _SAID
               for i, w in enumerate(toks)) or any(
        toks[i:i + 3] in (["did", "you", "say"], ["did", "you", "mention"],
                          ["did", "you", "recommend"], ["did", "you", "suggest"])
        for i in range(len(toks)))
    earlier_chat = any(toks[i:i + 2] in (["previous", "conversation"], ["previous", "chat"],
                                         ["last", "conversation"], ["earlier", "conversation"])
                       for i in range(len(toks)))
    told = any(w in ("i", "ive") and toks[i + 1:i + 2] and toks[i + 1] in _SAID_BY_USER
               for i, w in enumerate(toks))
    if said or (earlier_chat and not told):
        return _ASSISTANT
    return _USER if any(w in FIRST_PERSON for w in toks) else frozenset()


_USER, _ASSISTANT = frozenset({USER}), frozenset({ASSISTANT})
# Verbs after "you" that ask what the assistant said ("the eatery you recommended").
_SAID = frozenset(("recommended", "mentioned", "made", "gave", "said", "suggested", "told",
                   "provided", "shared", "listed", "wrote", "described", "explained",
                   "outlined", "proposed", "came"))
# ... and after "I": what the user said in an earlier chat ("I told you my dog's name").
_SAID_BY_USER = frozenset(("told", "mentioned", "said", "shared", "gave", "asked"))


def _as_a_child(toks: list[str], i: int) -> bool:
    """A child word saying when ("as a child", "when we were kids"), not who."""
    before = toks[max(0, i - 2):i]
    return before[-1:] in (["as"], ["were"]) or before in (["as", "a"], ["was", "a"])


def _into_not_liking(toks: list[str], i: int) -> bool:
    """"into" that does not say someone is into something ("get into a program", "into a car
    accident"): it does after a form of "be" or an intensifier ("is into jazz", "really
    into"), in a question that starts with one ("Is John into jazz?"), or at the end, a time
    word or two aside ("what is Melanie into?", "... into these days?")."""
    return (i == 0 or toks[i - 1] not in _INTO_LIKES) and toks[0] not in _INTO_LIKES \
        and not _INTO_TAIL.issuperset(toks[i + 1:])


_WORK_WORDS = frozenset(("work", "works", "working", "worked"))
# What "work on" is followed by when it says when ("on Mondays", "on the weekend").
_ON_DAYS = frozenset(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                      "sunday", "weekend", "weekday", "day", "holiday", "christma", "shift"))
# What "into" follows when it says someone likes something.
_INTO_LIKES = frozenset(("is", "are", "was", "were", "im", "be", "been", "really", "so", "very",
                         "getting", "got"))
# What may follow "into" at the end of a question that asks what someone likes.
_INTO_TAIL = frozenset(("these", "days", "nowadays", "now", "lately", "recently", "currently",
                        "anymore", "today"))


def _works_on(toks: list[str], i: int) -> bool:
    """"work(ing) on" something, a project ("what am I working on?"), not where someone works;
    "work on Mondays" is when."""
    if toks[i + 1:i + 2] != ["on"]:
        return False
    after = [w for w in toks[i + 2:i + 4] if w not in ("the", "a")][:1]
    return not after or stem(after[0]) not in _ON_DAYS


def _a_move_in_a_game(toks: list[str], i: int) -> bool:
    """"the move you made", "a bold move": a move in a game or a step, not a relocation;
    "the move to Denver", "how did the move go?" and "my move" are one."""
    before, after = toks[i - 1] if i else "", toks[i + 1] if i + 1 < len(toks) else ""
    return before in _MOVE_NOUN_BEFORE and after not in ("to", "from", "go", "went", "abroad")


# What comes before "move" as a noun of a game or a step ("the move", "a bold move").
_MOVE_NOUN_BEFORE = frozenset((
    "the", "a", "an", "that", "this", "which", "what", "next", "last", "first", "best", "good",
    "bad", "bold", "smart", "winning", "opening", "chess", "your", "his", "her", "their"))


def _calendar_date(toks: list[str], i: int) -> bool:
    """"date" of a calendar ("what date", "the date of the wedding", "due date", "up to
    date"), not an outing with someone: that is "a date", "first date", "type of date", "date
    night", "my date with Sam", "going on dates"."""
    before, after = toks[i - 1] if i else "", toks[i + 1] if i + 1 < len(toks) else ""
    romantic = before in _ROMANTIC_BEFORE or after in ("night", "nights", "with") \
        or (before == "my" and after != "of")
    return not romantic


# The words before "date(s)" that make it an outing with someone.
_ROMANTIC_BEFORE = frozenset((
    "a", "first", "second", "third", "blind", "dinner", "movie", "lunch", "coffee", "romantic",
    "double", "another", "next", "of", "on", "few", "some", "many", "his", "her", "their",
    "our", "your"))
# Cue and relation words and when they mean something else, so ask for nothing: each seen in
# LoCoMo or LongMemEval questions, where it put a wrong fact first.
_OTHER_SENSE: Mapping[str, Callable[[list[str], int], bool]] = MappingProxyType({
    **dict.fromkeys(_CHILDHOOD, _as_a_child),
    # A visit is "been to / in / at" a place or "where has X been?"; a continuous tense ("I've
    # been thinking about ...") or a state ("How long have I been vegan?") is none.
    "been": lambda toks, i: toks[i + 1:i + 2] not in ([], ["to"], ["in"], ["at"]),
    # Doing something together or a "get-together" (a party), not a couple: a couple is
    # "are/is ... together", "back together", "still together".
    "together": lambda toks, i: toks[:1] not in (["are"], ["is"], ["were"], ["was"])
    and toks[i - 1:i] not in (["back"], ["still"]),
    # "work out" is exercise; "work for me" suits me ("Does Tuesday work for you?").
    "work": lambda toks, i: toks[i + 1:i + 2] == ["out"] or _works_on(toks, i)
    or (toks[i + 1:i + 2] == ["for"] and toks[i + 2:i + 3] in (["me"], ["you"], ["us"],
                                                             ["them"], ["everyone"])),
    **dict.fromkeys(("works", "working", "worked"), _works_on),
    "old": lambda toks, i: toks[i - 1:i] not in (["how"], ["years"], ["year"]),  # former
    # "going back to our conversation", "going through", "what is going on": no plan (a
    # date someone is going on is one).
    "going": lambda toks, i: toks[i + 1:i + 2] in (["back"], ["through"], ["over"])
    or (toks[i + 1:i + 2] == ["on"] and toks[i - 2:i] in (["what", "is"], ["what", "'s"],
                                                           ["what", "was"])),
    "into": _into_not_liking,
    **dict.fromkeys(("move", "moves"), _a_move_in_a_game),
    **dict.fromkeys(("date", "dates"), _calendar_date),
})


# "What inspired John to ...?", "what made you ...": a verb after "what" asks what did
# something, not for a kind of value; the words after it say which one.
_CAUSE_VERBS = frozenset((
    "inspired", "inspires", "inspire", "motivated", "motivates", "motivate", "made", "makes",
    "make", "happened", "happens", "caused", "causes", "led", "leads", "helped", "helps",
    "prompted", "prompts", "drove", "drives", "sparked", "sparks", "kept", "keeps", "got",
    "gets", "brought", "brings", "changed", "changes", "influenced", "encouraged",
    "convinced", "pushed", "triggered"))


# Cue words that also name a kind of value: "what foods does Nate like?" asks for tastes
# that are foods (LoCoMo: "What are some foods that Audrey likes eating?" showed "Audrey
# likes caring for their pups"). Other cue words ask for the predicate itself ("what are
# Joanna's hobbies?": every taste).
_KIND_CUES = frozenset({"food", "drink"})  # as ``stem`` has them
_COPULAS = frozenset({"is", "are", "was", "were"})
_DETERMINERS = frozenset({"a", "an", "the", "some", "any", "all"})
# Words that end the noun a "what are some ..." question asks for: a clause or a
# preposition begins ("the total cost of the new food bowl ...": the cost is the kind, the
# bowl says which).
_CLAUSE_WORDS = frozenset({
    "that", "which", "who", "whom", "whose", "where", "when", "to", "i", "you", "he", "she",
    "we", "they", "it", "my", "your", "his", "her", "our", "their", "of", "for", "in", "on",
    "at", "about", "from", "with", "by", "during", "regarding", "between", "after", "before"})


def _value_kind(toks: list[str], text: str = "") -> frozenset[str]:
    """The words naming the kind of value asked for: those after "what"/"which" up to the
    verb ("which cities has Jon visited?", "what kind of indoor activities ..."), or after
    "what is/are" and a determiner up to a clause, a preposition or a name ("what are some
    foods that Audrey likes?": a word ``text`` writes with a capital): they say what sort
    of answer is wanted, not which one."""
    out: set[str] = set()
    for i, word in enumerate(toks):
        if word not in ("what", "which"):
            continue
        rest = toks[i + 1:]
        if rest[:1] and rest[0] in _COPULAS and rest[1:2] and rest[1] in _DETERMINERS:
            proper = _proper_names(text)
            for nxt in rest[2:]:
                if nxt in _VERB_WORDS or nxt in _CLAUSE_WORDS or nxt in proper:
                    break
                out.add(stem(nxt))
        elif rest[:1] and rest[0] not in _CAUSE_VERBS:
            for nxt in rest:
                if nxt in _VERB_WORDS:
                    break
                out.add(stem(nxt))
    return frozenset(out)


def _proper_names(text: str) -> frozenset[str]:
    """The case-folded words of ``text`` written with a capital, but its first ("Audrey" of
    "What are some foods that Audrey likes?")."""
    found = _WORD_RE.findall(text)
    return frozenset(w.casefold() for w in found[1:] if w[:1].isupper() and w != "I")


def _asks_or_dates(term: str) -> bool:
    """Whether a (stemmed) query term only asks for a predicate or names a time."""
    return term in _CUE_STEMS or term in _TIME_WORDS or term in _MONTH_NAMES or term.isdigit()


def _asks_what_one_does(toks: list[str]) -> bool:
    if "for a living" in " ".join(toks):
        return True
    if toks[:1] != ["what"] or len(toks) < 4 or toks[1] not in ("does", "do"):
        return False
    return any(w == "do" and toks[i - 1] != "to" for i, w in enumerate(toks[3:], start=3))


def stem(word: str) -> str:
    """A crude plural-insensitive form for matching a query word to an object word."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


# Cue and relation words as ``Intent.terms`` holds them ("kids" -> "kid").
_CUE_STEMS = frozenset(stem(w) for w in (*CUES, *RELATIONS))
