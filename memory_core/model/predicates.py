"""The predicate vocabulary: every belief's predicate is one of these names.

A predicate is *functional* when a subject holds at most one active value at any world time
(``lives_in``, ``works_at``, ``name_is``): a newer belief closes the older one. Non-functional
predicates (``likes``, ``has_child``) accumulate. ``object_kind`` tells the writer whether the
object should become an entity (a node of the ego graph), stay a literal, or is a date.

Conventions that are not obvious from the names:

- ``favorite`` objects are ``"<category>: <value>"`` (``"food: sushi"``), one predicate
  instead of one per category; it is non-functional because categories differ.
- Event predicates (``moved_to``, ``visited``, ``attended``, ``bought``, ``decided``) put the
  date of the event in ``valid_from`` and stay valid afterwards: the event remains true.
- Commitments (``commitment=True``): ``plans_to`` (the user's plans), ``committed_to`` (a
  promise or obligation) and ``reminder`` (what the assistant promised to remind of) put
  their date or deadline in ``valid_to``: after it the commitment is no longer current, and
  ``commitment_gc`` marks it ``expired`` once its grace period has passed too (an undated
  one after its time to live). DESIGN.md's ``plans`` / ``promised`` are ``plans_to`` /
  ``committed_to`` here.
- ``related_to`` is the ego-anchor edge (``user -related_to-> subject``) the writer adds when a
  subject does not otherwise reach the hub; extractors do not emit it.
- ``remembers`` holds a free fact the user explicitly asked to keep ("remember that ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from memory_core.errors import UnknownPredicateError

ObjectKind = Literal["entity", "literal", "date"]


@dataclass(frozen=True)
class PredicateSpec:
    name: str
    functional: bool
    object_kind: ObjectKind
    description: str
    commitment: bool = False  # a plan or promise with a date: commitment_gc expires it


_SPECS: tuple[PredicateSpec, ...] = (
    # identity
    PredicateSpec("name_is", True, "literal", "the subject's name"),
    PredicateSpec("preferred_name_is", True, "literal", "how the subject wants to be called"),
    PredicateSpec("age_is", True, "literal", "age in years, as a number"),
    PredicateSpec("born_on", True, "date", "birth date, birthday or birth year as stated"),
    PredicateSpec("gender_identity_is", True, "literal", "gender identity, e.g. trans woman"),
    PredicateSpec("pronouns_are", True, "literal", "pronouns, e.g. they/them"),
    PredicateSpec("nationality_is", False, "literal", "a nationality (dual ones accumulate)"),
    PredicateSpec("speaks", False, "literal", "a language the subject speaks"),
    # location
    PredicateSpec("lives_in", True, "entity", "current place of residence"),
    PredicateSpec("comes_from", False, "entity", "place of origin or where they grew up"),
    PredicateSpec("born_in", True, "entity", "place of birth"),
    PredicateSpec("moved_to", False, "entity", "event: moved to a place (valid_from = move)"),
    PredicateSpec("visited", False, "entity", "event: visited or travelled to a place"),
    # work and education
    PredicateSpec("works_at", True, "entity", "current employer or workplace"),
    PredicateSpec("job_title_is", True, "literal", "current occupation or role"),
    PredicateSpec("works_on", False, "entity", "a project the subject is working on"),
    PredicateSpec("studies_at", False, "entity", "school or university attended now"),
    PredicateSpec("studies", False, "literal", "field of study"),
    PredicateSpec("graduated_from", False, "entity", "event: graduated from a school"),
    PredicateSpec("learning", False, "literal", "a skill or language being learned"),
    PredicateSpec("plays", False, "literal", "an instrument, sport or game the subject plays"),
    PredicateSpec("practices", False, "literal", "a practice such as yoga or a martial art"),
    PredicateSpec("read", False, "literal", "event: a book or other text the subject read"),
    PredicateSpec("watched", False, "literal", "event: a film, show or series the subject watched"),
    # preferences
    PredicateSpec("likes", False, "entity", "something the subject likes, loves or enjoys"),
    PredicateSpec("dislikes", False, "entity", "something the subject dislikes"),
    PredicateSpec("prefers", False, "literal", "a preference, e.g. tea over coffee"),
    PredicateSpec("favorite", False, "literal", "a favorite, as '<category>: <value>'"),
    PredicateSpec("diet", True, "literal", "the diet followed now, e.g. vegan, keto"),
    # relationships
    PredicateSpec("married_to", True, "entity", "spouse"),
    PredicateSpec("has_partner", False, "entity", "partner, girlfriend, boyfriend, fiance(e)"),
    PredicateSpec("has_sibling", False, "entity", "a sister or brother"),
    PredicateSpec("has_child", False, "entity", "a son, daughter or child"),
    PredicateSpec("has_parent", False, "entity", "a mother or father"),
    PredicateSpec("has_relative", False, "entity", "extended family: cousin, aunt, ..."),
    PredicateSpec("child_count_is", True, "literal", "number of children, as a number"),
    PredicateSpec("friend_of", False, "entity", "a friend"),
    PredicateSpec("colleague_of", False, "entity", "a coworker, boss or teammate"),
    PredicateSpec("related_to", False, "entity", "ego-anchor edge from the hub (writer only)"),
    # possessions
    PredicateSpec("has_pet", False, "entity", "a pet, by name when known"),
    PredicateSpec("owns", False, "entity", "a possession: car, house, instrument"),
    PredicateSpec("bought", False, "entity", "event: bought something (valid_from = purchase)"),
    PredicateSpec("is_a", False, "literal", "the kind of an entity, e.g. Max is_a dog"),
    # plans, commitments, decisions, events
    PredicateSpec("plans_to", False, "literal", "a plan; valid_to = its target date",
                  commitment=True),
    PredicateSpec("committed_to", False, "literal", "a promise or obligation; valid_to = due",
                  commitment=True),
    PredicateSpec("reminder", False, "literal",
                  "something the assistant promised to remind of; valid_to = when due",
                  commitment=True),
    PredicateSpec("decided", False, "literal", "event: a decision taken"),
    PredicateSpec("attended", False, "entity", "event: attended a gathering or event"),
    # explicit free facts
    PredicateSpec("remembers", False, "literal", "a fact the user explicitly asked to keep"),
)

PREDICATES: Mapping[str, PredicateSpec] = MappingProxyType({s.name: s for s in _SPECS})
COMMITMENT_PREDICATES: tuple[str, ...] = tuple(s.name for s in _SPECS if s.commitment)


def get_predicate(name: str) -> PredicateSpec:
    """The spec for ``name``; raises UnknownPredicateError naming the valid choices."""
    try:
        return PREDICATES[name]
    except (KeyError, TypeError):
        choices = ", ".join(PREDICATES)
        raise UnknownPredicateError(
            f"unknown predicate {name!r}: use one of {choices} "
            "(see memory_core/model/predicates.py)"
        ) from None


def is_functional(name: str) -> bool:
    """Whether ``name`` allows at most one active value per subject (raises if unknown)."""
    return get_predicate(name).functional


# The words a relative is named by, per relation predicate ("a|b c|d"): the extractor reads
# "my grandson Eli" with them (``RELATION_OF``, in ``extraction.lexicon``) and recall reads "where
# does my grandson live?" with the same words (``recall.intent.RELATIONS``), so a relative
# memory stores is one a query can ask about. Here, below both, so that each imports it.
RELATION_WORDS: Mapping[str, str] = MappingProxyType({
    "has_sibling": "sister|brother|sibling|twin sister|twin brother|twin|half-sister|"
    "half-brother|stepsister|stepbrother|step-sister|step-brother|sis",
    "married_to": "wife|husband|spouse|hubby",
    "has_partner": "partner|girlfriend|boyfriend|fiance|fiancé|fiancee|fiancée|gf|bf|"
    "significant other",
    "has_child": "son|daughter|kid|child|stepson|stepdaughter|step-son|step-daughter",
    "has_parent": "mom|mother|mum|mommy|dad|father|daddy|stepmom|stepmother|stepdad|"
    "stepfather",
    "has_relative": "cousin|aunt|auntie|uncle|grandma|grandmother|granny|nana|grandpa|"
    "grandfather|grandad|granddad|grandson|granddaughter|grandkid|grandchild|niece|nephew|"
    "mother-in-law|father-in-law|sister-in-law|brother-in-law|son-in-law|daughter-in-law",
    "friend_of": "friend|best friend|bestie|bff|buddy|pal|childhood friend",
    "colleague_of": "coworker|co-worker|colleague|boss|manager|supervisor|teammate|"
    "team lead|cofounder|co-founder|business partner",
})
# The same, word -> relation predicate, in the order above.
RELATION_OF: Mapping[str, str] = MappingProxyType(
    {word: predicate for predicate, words in RELATION_WORDS.items() for word in words.split("|")})
