"""The write rules of beliefs, as pure functions (no database, no clock).

- **Trust order**: the order of ``memory_core.vocabulary.SOURCES``, most trusted first.
  The user is the authority on their own life; an operator curates; an importer records an
  independent source; the heuristic extractor only copies the user's own words with fixed
  patterns, so it outranks an LLM that may infer or hallucinate; system tools write
  structural edges (the ego anchor) that are not statements at all.
- **Content key** (``belief_uid``): a digest of tenant, subject entity id, predicate,
  normalised object, ``valid_from`` and source. Replaying or redelivering the same statement
  hits the same row; saying it again at a later world time, or from another source, is a new
  row (so trust and history never depend on which copy arrived first).
- **Slot resolution**: the status and ``valid_to`` of every belief in a slot are recomputed
  from the whole slot in world-time order, so any arrival order (or a replay) gives the same
  rows. A functional predicate's slot is (tenant, subject, predicate); a non-functional one's
  is that plus the normalised object (restating a fact closes the older copy of it).
  ``invalidated``, ``pending_review`` and ``expired`` are decisions, never recomputed.
- **Expiry** (``commitment_gc``): a commitment past its time to live, or a pending-review item
  nobody reviewed in time, becomes ``expired``: kept, never current. An expired commitment
  keeps its world time (``as_of`` still finds it); an expired pending item gets an empty
  one (``valid_to = valid_from``): it was never accepted as true.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from memory_core.vocabulary import (
    ACTIVE,
    CONFLICT,
    EXPIRED,
    INVALIDATED,
    PENDING_REVIEW,
    SOURCES,
    SUPERSEDED,
    USER_EXPLICIT,
)

_RANK = {source: len(SOURCES) - i for i, source in enumerate(SOURCES)}

# Decisions by a person, a review or an expiry: slot resolution leaves them as they are.
STICKY = frozenset({INVALIDATED, PENDING_REVIEW, EXPIRED})
# What recall shows and what entity counts count.
COUNTED = (ACTIVE, CONFLICT)
PROTECTED_SOURCE = USER_EXPLICIT

_SPACE_RE = re.compile(r"\s+")
_EDGE_PUNCT = " \t\n.,;:!?\"'`()[]{}<>"


def trust_rank(source: str) -> int:
    """Higher is more trusted. Raises ValueError for an unknown source."""
    try:
        return _RANK[source]
    except KeyError:
        raise ValueError(
            f"unknown belief source {source!r}: use one of {', '.join(SOURCES)}"
        ) from None


def normalize_object(text: str) -> str:
    """The comparison form of an object: NFKC, case-folded, single spaces, no edge punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RE.sub(" ", folded).strip(_EDGE_PUNCT)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def content_key(tenant: str, subject_id: str, predicate: str, object_norm: str,
                valid_from: str, source: str, negated: bool = False) -> str:
    """The ``belief_uid`` of a statement (``valid_from`` in the storage encoding)."""
    kind = "negation" if negated else "belief"
    return "b_" + _digest(kind, tenant, subject_id, predicate, object_norm, valid_from,
                          source)[:32]


def anchor_key(tenant: str, subject_id: str) -> str:
    """The ``belief_uid`` of the ego anchor ``user -related_to-> subject`` (one per subject)."""
    return "b_" + _digest("anchor", tenant, subject_id)[:32]


def predicate_words(predicate: str) -> str:
    return predicate.replace("_", " ")


def render_text(subject_name: str, predicate: str, object_text: str,
                negated: bool = False) -> str:
    """The searchable text of a belief: ``<subject name> <predicate words> <object>``."""
    neg = "no longer " if negated else ""
    return f"{subject_name} {neg}{predicate_words(predicate)} {object_text}"


# How a current fact reads in recall's results, where the predicate's name is no phrase
# ("Maya diet vegan"). Display only: the stored text, which keyword and dense search read,
# stays ``render_text``'s, so no ranking and no stored row depends on these words.
FACT_PHRASES = {
    "name_is": "{s}'s name is {o}",
    "preferred_name_is": "{s} prefers to be called {o}",
    "age_is": "{s} is {o} years old",
    "born_on": "{s} was born on {o}",
    "born_in": "{s} was born in {o}",
    "gender_identity_is": "{s}'s gender identity: {o}",
    "pronouns_are": "{s}'s pronouns: {o}",
    "nationality_is": "{s}'s nationality: {o}",
    "job_title_is": "{s}'s job title: {o}",
    "learning": "{s} is learning {o}",
    "favorite": "{s}'s favorite {o}",  # the object is "<category>: <value>"
    "diet": "{s} follows a {o} diet",
    "has_partner": "{s} has a partner: {o}",
    "has_sibling": "{s} has a sibling: {o}",
    "has_child": "{s} has a child: {o}",
    "has_parent": "{s} has a parent: {o}",
    "has_relative": "{s} has a relative: {o}",
    "child_count_is": "{s}'s number of children: {o}",
    "friend_of": "{s} is a friend of {o}",
    "colleague_of": "{s} is a colleague of {o}",
    "has_pet": "{s} has a pet: {o}",
    "decided": "{s} decided: {o}",
    "reminder": "{s} has a reminder: {o}",
    "remembers": "{s} asked to remember: {o}",
}


# First-person words in an object are its speaker's ("Gina works on my online store", said
# by Gina; "Elin likes my cooking", said by the user about her sister). In a sentence about
# the subject, shown to a model that talks to the user, "my" reads as the narrator's or the
# user's own: the fact says whose instead. Lowercase words only ("My Little Pony" is a name).
_FIRST_PERSON = re.compile(
    r"\b(?:(?P<own>my|our|mine|ours)|(?P<obj>me|us|myself|ourselves)"
    r"|(?P<subj>(?-i:I)|we)(?P<rest>['’](?:m|re|ve|d|ll)\b|\s+(?:am|was|were|are)\b)?)\b")
# "I" after a capitalised word is a numeral ("World War I", "Louis I"); a pronoun "I" or
# "we" is followed by a lowercase word ("I had a tattoo").
_NOT_THE_PRONOUN_I = re.compile(r"[A-Z][\w'’-]*\s+$")
_VERB_NEXT = re.compile(r"\s+[a-z]")
_THEIR = {"my": "their", "our": "their", "mine": "theirs", "ours": "theirs", "me": "them",
          "us": "them", "myself": "themselves", "ourselves": "themselves"}
_THEY_VERB = {"m": "'re", "re": "'re", "ve": "'ve", "d": "'d", "ll": "'ll", "am": " are",
              "was": " were", "were": " were", "are": " are"}


def in_third_person(object_text: str, speaker: str | None) -> str:
    """``object_text`` with its first-person words made the speaker's: "their" (and "they",
    "them") when the speaker is the fact's subject (``speaker`` None), else "<speaker>'s"
    (and "<speaker>") for what the speaker owns or is; a clause the speaker leads ("I think",
    said of someone else) is left as said."""

    def swap(m: re.Match[str]) -> str:
        word, rest = m.group(0), m.group("rest")
        if m.group("own"):
            return _THEIR[word] if speaker is None else f"{speaker}'s"
        if m.group("obj"):
            return _THEIR[word] if speaker is None else speaker
        numeral = word[0] == "I" and _NOT_THE_PRONOUN_I.search(object_text[:m.start()])
        no_verb = not rest and not _VERB_NEXT.match(object_text, m.end())
        if speaker is not None or numeral or no_verb:
            return word  # said of someone else, or "World War I", "I-95"
        return "they" + (_THEY_VERB[rest.lstrip("'’ ").lower()] if rest else "")

    return _FIRST_PERSON.sub(swap, object_text)


def fact_text(subject_name: str, predicate: str, object_text: str,
              speaker: str | None = None) -> str:
    """A current fact as a sentence for the prompt (``FACT_PHRASES``, else ``render_text``).
    ``speaker``: who said it when that is not the subject (None: the subject); first-person
    words in the object are made theirs (``in_third_person``)."""
    object_text = in_third_person(object_text, speaker)
    phrase = FACT_PHRASES.get(predicate)
    if phrase is None:
        return render_text(subject_name, predicate, object_text)
    return phrase.format(s=subject_name, o=object_text)


@dataclass(frozen=True)
class SlotBelief:
    """What slot resolution needs of one belief. Times are in the storage encoding."""

    uid: str
    object_norm: str
    valid_from: str
    source: str
    status: str
    valid_to: str | None = None
    stated_valid_to: str | None = None  # an end the statement itself gave (a deadline)
    negated: bool = False  # "no longer ...": ends a holder with the same object at valid_from


@dataclass(frozen=True)
class Resolution:
    status: str
    valid_to: str | None


def slot_of(functional: bool, object_norm: str) -> str | None:
    """The sub-slot key within (tenant, subject, predicate): None for a functional predicate."""
    return None if functional else object_norm


def resolve_slot(beliefs: Iterable[SlotBelief], functional: bool) -> dict[str, Resolution]:
    """Status and ``valid_to`` of every belief of one (tenant, subject, predicate).

    Walks each slot in world-time order (ties: lower trust first so the more trusted wins,
    then uid). Each belief closes the current holder at its ``valid_from`` — except that a
    ``user_explicit`` holder is never closed by a less trusted belief: a different object is
    kept as ``conflict``, the same object is absorbed (closed at once, adding nothing). The
    last holder is ``active``. Sticky statuses are returned unchanged and take no part.
    """
    out: dict[str, Resolution] = {}
    slots: dict[str | None, list[SlotBelief]] = {}
    for belief in beliefs:
        if belief.status in STICKY:
            out[belief.uid] = Resolution(belief.status, belief.valid_to)
        else:
            slots.setdefault(slot_of(functional, belief.object_norm), []).append(belief)
    for members in slots.values():
        out.update(_walk(members))
    return out


def _walk(members: list[SlotBelief]) -> dict[str, Resolution]:
    ordered = sorted(members, key=lambda b: (b.valid_from, trust_rank(b.source), b.uid))
    out: dict[str, Resolution] = {}
    holder: SlotBelief | None = None
    for belief in ordered:
        protected = holder is not None and (
            holder.source == PROTECTED_SOURCE
            and trust_rank(belief.source) < trust_rank(holder.source))
        if belief.negated:
            holder = _negate(out, holder, belief, protected)
            continue
        if holder is None:
            holder = belief
            continue
        if protected and belief.object_norm != holder.object_norm:
            out[belief.uid] = Resolution(CONFLICT, belief.stated_valid_to)
        elif protected:
            out[belief.uid] = Resolution(SUPERSEDED, belief.valid_from)
        else:
            out[holder.uid] = Resolution(SUPERSEDED, _end(holder, belief.valid_from))
            holder = belief
    if holder is not None:
        out[holder.uid] = Resolution(ACTIVE, holder.stated_valid_to)
    return out


def _negate(out: dict[str, Resolution], holder: SlotBelief | None, negation: SlotBelief,
            protected: bool) -> SlotBelief | None:
    """A negation ends a holder of the same object (unless protected: then a conflict).

    The negation itself is never a current belief: it is closed at its own start.
    """
    if holder is None or holder.object_norm != negation.object_norm:
        out[negation.uid] = Resolution(SUPERSEDED, negation.valid_from)
        return holder
    if protected:
        out[negation.uid] = Resolution(CONFLICT, None)
        return holder
    out[holder.uid] = Resolution(SUPERSEDED, _end(holder, negation.valid_from))
    out[negation.uid] = Resolution(SUPERSEDED, negation.valid_from)
    return None


def _end(belief: SlotBelief, closed_at: str) -> str:
    """A closed belief ends when its successor starts, or earlier when it said so."""
    if belief.stated_valid_to is not None and belief.stated_valid_to < closed_at:
        return belief.stated_valid_to
    return closed_at


# Replacing statements ("I prefer mild food now", "we're going to Seoul in April now"): a
# change said without naming the old value. They end the older values of the same topic:
# a preference with the same head word ("spicy food" / "mild food"), a plan with the same
# verb and the same date. Families of predicates that share a topic:
_TOPIC_FAMILIES = ({"likes", "prefers"}, {"plans_to"})
REPLACEABLE = frozenset().union(*_TOPIC_FAMILIES)


@dataclass(frozen=True)
class Stated:
    """What topic matching needs of a belief: predicate, normalised object, stated end."""

    predicate: str
    object_norm: str
    stated_valid_to: str | None = None


def topic_family(predicate: str) -> frozenset[str] | None:
    """The predicates sharing ``predicate``'s topic (None: a replacing statement of it ends
    nothing by topic; its slot's resolution does)."""
    return next((frozenset(f) for f in _TOPIC_FAMILIES if predicate in f), None)


def replaces_topic(new: Stated, old: Stated) -> bool:
    """Whether the replacing statement ``new`` ends ``old`` (pure; no dates compared but the
    plans' own). A restatement of the same object is not a replacement."""
    family = topic_family(new.predicate)
    if family is None or old.predicate not in family or new.object_norm == old.object_norm:
        return False
    new_words, old_words = new.object_norm.split(), old.object_norm.split()
    if new.predicate == "plans_to":
        return (new.stated_valid_to is not None
                and new.stated_valid_to == old.stated_valid_to
                and new_words[:1] == old_words[:1])
    return len(new_words) > 1 and len(old_words) > 1 and new_words[-1] == old_words[-1]


def count_contribution(status: str, subject_id: str,
                       object_entity_id: str | None) -> dict[str, tuple[int, int]]:
    """What one belief adds to ``(belief_count, graph_degree)`` of each entity it touches.

    Only counted statuses (active, conflict) count. A belief counts once for its subject and
    once for its object entity; an edge between two different entities adds one degree to each.
    """
    if status not in COUNTED:
        return {}
    if object_entity_id is None or object_entity_id == subject_id:
        return {subject_id: (1, 0)}
    return {subject_id: (1, 1), object_entity_id: (1, 1)}


def importance(text: str, *, has_beliefs: bool, explicit: bool) -> float:
    """Initial importance of an episode from simple signals, in [0, 1]."""
    score = 0.3 + min(len(text) / 600.0, 0.3)
    if has_beliefs:
        score += 0.2
    if explicit:
        score += 0.2
    return round(min(score, 1.0), 4)
