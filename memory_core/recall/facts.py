"""The facts channel: the beliefs valid at the reference time that answer the query.

Candidates (each a bounded, indexed lookup; nothing scans a tenant's beliefs):

- the beliefs recall's first round already found: the entity bridge (``belief_entity``),
  keyword (``belief_fts``), dense (``belief_dense``) and the graph walk (``graph``, with
  its PageRank);
- ``fact_subject``: the beliefs of the query's subjects with the predicates the query asks
  about (``recall/intent.py``), one range of ``ix_beliefs_subject`` (tenant, subject,
  predicate). The subjects are the entities the query names, the hub ``user`` when it says
  I/me/my (or names the user), and the relations it names after a possessive ("my sister"
  -> whoever ``user has_sibling``; "Luis's brother"): a one-hop walk from the owner along
  the asked relation. The hub's whole neighbourhood is never read (it is all of memory).

Ranking favours the query's subject and predicate (with a relation named, the user's own
beliefs count only for that relation); every component is in [0, 1]:
``score = 1.0 subject + 1.0 predicate + 0.5 subject*predicate + 0.6 object + 0.4 entity +
0.4 keyword + 0.4 dense + 0.2 graph + 0.1 confidence`` (``object``: the share of the
object's content words the query says; ``entity``: the belief's subject or object is an
entity the query names; ``keyword``/``dense``: ``(k+1)/(k+rank)`` in that list; ``graph``:
PageRank scaled to the best node). A belief in ``conflict`` with a more trusted one counts
``CONFLICT_FACTOR`` of its score.

A candidate is a fact for this query only when it answers what the query asks: the asked
subject with an asked predicate, or an object the query names (more than half of its content
words, ``OBJECT_NAMED``; the names of the people the query asks about count in an object of
free text on neither side), or an asked predicate with
a named entity, a keyword match or a close dense neighbour. The asked subject and predicate
are the answer for a functional slot (one value: lives_in, works_at); for a many-valued one
(bought, visited, likes, plans_to) a value is the answer only when the query leaves the
slot open ("what did I buy?", "which cities has Jon visited?": nothing said of the value
but its kind and the names of whom it asks about, ``Intent.specifics``; a name of anything
else names the value: "turtles" in "why does Nate like turtles?", where every taste of
Nate's was shown, LoCoMo 402 -> 379 facts shown, none from an evidence turn lost, R@10
0.713 -> 0.715), names some of its object, or when the turn it was
drawn from is among the best ``CORROBORATING_ITEMS`` evidence items the query matched
directly: "what did I buy from a thrift store?" is not answered by "the user bought a bike
helmet" (LongMemEval, hash: 32 of the 41 facts shown on 48 questions were such values,
none from an evidence turn; the rule leaves 10, 2 of them from evidence turns). A value
of a slot of many kinds (tastes: likes, dislikes, favorite, prefers; attended, visited:
``OWN_KINDS``) answers a query naming another kind of value than the slot's own ("what kind
of books does Nate enjoy?", "what workshop did Caroline attend?", ``Intent.kind``; not
"which cities has Jon visited?") only when its object names the kind, it is among the
closest dense neighbours, or its turn is among that evidence (LoCoMo, fastembed: 39 of 359
facts shown were such values, "Nate likes turtles" for the books, none from an evidence
turn; R@5 0.615 -> 0.618, R@10 0.707 -> 0.708). A belief
that is merely about a named person is not (LoCoMo, hash, facts counted by their source
turn before the evidence: 7.7 such facts per recall, 1% of them pointing at an evidence
turn, R@10 0.512 against 0.670 without facts). Nor is a belief about someone else: when the
query asks about subjects of beliefs (``asked_subjects``: the user it says I/me to, the
people and relatives it names), a belief whose subject and object are none of them is left
out (``about_someone_else``; LoCoMo, fastembed: 202 of 593 facts shown, 2 of them pointing
at an evidence turn; R@10 0.701 -> 0.708). A relation named after its owner ("Melanie's
kids") makes the owner's own beliefs count only for that relation, known relative or not.

Visibility is ``candidates.belief_filter``: now, the currently valid beliefs (active or
conflict, ``valid_from <= now < valid_to``); with ``as_of``, the ones valid at that world
time as memory knows it now (transaction time = now: an invalidated belief is never shown,
a superseded one is shown for the time it held). Ego anchors (``related_to``, written by
the system, not stated) are never facts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType

from memory_core.db.sqlite import Connection
from memory_core.model.belief_rules import fact_text, normalize_object
from memory_core.model.hygiene import ASSISTANT, USER, normalize_label, speaker_role
from memory_core.model.predicates import PREDICATES
from memory_core.model.tenants import HUB
from memory_core.recall.candidates import Candidate, Scope, belief_filter, load, param_marks
from memory_core.recall.intent import SECONDARY, Intent, stem, words
from memory_core.recall.ppr import Node
from memory_core.recall.query import query_terms
from memory_core.recall.result import RecallFact
from memory_core.vocabulary import CONFLICT, SUPERSEDED, SYSTEM_TOOL

LIST = "fact_subject"
SUBJECT_K = 40  # beliefs taken from the subject/predicate lookup
RELATION_K = 10  # relation targets taken per query ("my sisters")
SUPERSEDED_SHOWN = 3  # earlier values listed per fact
RANK_K = 10  # the k of (k+1)/(k+rank) for list ranks
DENSE_ONLY_TOP = 3  # with an asked predicate, a dense neighbour this close is relevant
# The query names a belief's object when it says more than this share of the object's
# content words: one word of "LGBTQ counseling workshop" is a topic in common, not the
# object named. Facts counted by their source turns before the evidence, share > 0 ->
# > 0.5: LongMemEval (hash, 48 questions) R@5 0.508 -> 0.696, R@10 0.756 -> 0.828 (none of
# the facts it removed on the first 20 questions pointed at an evidence turn); LoCoMo
# (fastembed) R@5 0.565 -> 0.589, R@10 0.692 -> 0.696.
OBJECT_NAMED = 0.5
# A value of a many-valued slot that the query does not name is a fact only when its source
# turn is among the turns of this many best evidence items (``_one_of_many_corroborated``).
CORROBORATING_ITEMS = 10
CONFLICT_FACTOR = 0.8
_PLACES = ("place places city cities town towns country countries state states area areas "
           "region regions location locations destination destinations spot spots")
# The predicates whose objects are of many kinds, each with the words naming the kind its
# objects all are. A query naming another kind ("what kind of books does Nate enjoy?",
# "what workshop did Caroline attend?") is answered only by values of that kind (_of_kind);
# "which cities has Jon visited?" names the predicate's own kind and leaves the slot open.
# Tastes (likes, ...) have objects of every kind: a food, a book, a pastime.
OWN_KINDS: Mapping[str, frozenset[str]] = MappingProxyType({
    predicate: frozenset(stem(w) for w in own.split()) for predicate, own in (
        ("likes", "thing things"), ("dislikes", "thing things"),
        ("favorite", "thing things"), ("prefers", "thing things"),
        ("attended", "event events"), ("visited", _PLACES),
        ("read", "book books novel novels story stories series author authors title titles"),
        ("watched", "movie movies film films show shows series documentary documentaries "
                    "episode episodes title titles"))})
OWNER_WITH_RELATION = 0.5  # "my sister": the sister is the subject; the user, less so
NAME_PREDICATES = frozenset({"name_is", "preferred_name_is"})
OTHER_RELATIVE = 0.7  # "my son": the daughter (has_child too) when the son is known by name
WEIGHTS: Mapping[str, float] = {
    "subject": 1.0, "predicate": 1.0, "joint": 0.5, "object": 0.6, "entity": 0.4,
    "keyword": 0.4, "dense": 0.4, "graph": 0.2, "confidence": 0.1,
}


@dataclass
class FactCandidate:
    """A belief with what ranking needs beyond ``Candidate``."""

    cand: Candidate
    predicate: str
    object_text: str
    negated: bool
    source: str
    valid_to: str | None
    components: dict[str, float] = field(default_factory=dict)
    score: float = 0.0


@dataclass(frozen=True)
class FactsOutcome:
    """The facts (handles from 1), their candidates ranked, and why each was kept or not."""

    facts: tuple[RecallFact, ...]
    ranked: list[Candidate]
    reasons: dict[tuple[str, int], str]
    kept: list[Candidate]


def subjects(conn: Connection, scope: Scope, intent: Intent,
             named: Sequence[str]) -> dict[str, float]:
    """Entity id -> how surely the query is about it (see the module docstring)."""
    owners = list(dict.fromkeys([*named, *([HUB] if intent.first_person else [])]))
    out = {e: 1.0 for e in owners}
    if owners and intent.relations:
        cond, params = belief_filter(scope)
        rows = conn.execute(
            f"SELECT b.subject_id, b.object_entity_id FROM beliefs b INDEXED BY "
            f"ix_beliefs_subject WHERE {cond} AND b.subject_id IN ({param_marks(len(owners))}) AND "
            f"b.predicate IN ({param_marks(len(intent.relations))}) AND b.object_entity_id IS NOT "
            "NULL ORDER BY b.valid_from DESC LIMIT ?",
            [*params, *owners, *intent.relations, RELATION_K]).fetchall()
        # The owners are asked about less than the relation itself, whether or not memory
        # knows the relative: "what do Melanie's kids like?" is not answered by what Melanie
        # likes (LoCoMo showed her likes as facts for it).
        for owner in owners:
            out[owner] = OWNER_WITH_RELATION
        targets = [entity_id for _, entity_id in rows]
        # "my son" among a son and a daughter (both has_child): an entity named for the
        # relation word ("user's son") is the one asked about.
        names = _names(conn, scope.tenant, targets)
        named_for = {e for e in targets
                     if intent.relation_words & set(words(names.get(e, "")))}
        for entity_id in targets:
            out[entity_id] = 1.0 if not named_for or entity_id in named_for else OTHER_RELATIVE
    return out


def subject_lookup(conn: Connection, scope: Scope, subject_ids: Iterable[str],
                   predicates: Iterable[str]) -> list[Candidate]:
    """Visible beliefs of ``subject_ids`` with one of ``predicates``, newest first: one
    range of ``ix_beliefs_subject`` per (subject, predicate)."""
    subs, preds = sorted(set(subject_ids)), sorted(set(predicates))
    if not subs or not preds:
        return []
    cond, params = belief_filter(scope)
    ids = [r[0] for r in conn.execute(
        f"SELECT b.id FROM beliefs b INDEXED BY ix_beliefs_subject WHERE {cond} AND "
        f"b.subject_id IN ({param_marks(len(subs))}) "
        f"AND b.predicate IN ({param_marks(len(preds))}) "
        "ORDER BY b.valid_from DESC LIMIT ?", [*params, *subs, *preds, SUBJECT_K])]
    found = load(conn, "belief", scope, ids)
    return [found[i] for i in ids if i in found]


def _rank_value(ranks: Mapping[str, int], name: str) -> float:
    rank = ranks.get(name)
    return (RANK_K + 1) / (RANK_K + rank) if rank else 0.0


def score(fc: FactCandidate, about: Mapping[str, float], named_set: AbstractSet[str],
          intent: Intent, ppr: float, names: AbstractSet[str] = frozenset()) -> None:
    """Set ``fc.components`` and ``fc.score`` (see the module docstring). ``names``: the
    words of the names of the people the query asks about (``object_match``)."""
    cand = fc.cand
    subject = about.get(cand.subject_id or "", 0.0)
    predicate = float(intent.predicates.get(fc.predicate, 0.0))
    if subject == OWNER_WITH_RELATION:
        # "what is my dog called": of the owner's own beliefs only the relation counts
        # (has_pet), not the owner's name; and less than what is asked of the relative.
        asks_more = any(p not in intent.relations for p in intent.predicates)
        predicate = 0.0 if fc.predicate not in intent.relations else (
            SECONDARY if asks_more else 1.0)
    comps = {
        "subject": subject, "predicate": predicate, "joint": subject * predicate,
        # A name matches the query that names its person; it answers only a name question.
        "object": 0.0 if fc.predicate in NAME_PREDICATES and not predicate
        # A person named in an object of free text ("asked to remember: Jon, just do it")
        # is not the object named; a person who is the object ("has a pet: Toby") is.
        else object_match(fc.object_text, intent.terms,
                          names if cand.object_entity_id is None else frozenset()),
        "entity": 1.0 if (cand.subject_id in named_set or cand.object_entity_id in named_set
                          or (cand.object_entity_id in about
                              and about.get(cand.subject_id or "") == OWNER_WITH_RELATION))
        else 0.0,
        "keyword": _rank_value(cand.ranks, "belief_fts"),
        "dense": _rank_value(cand.ranks, "belief_dense"),
        "graph": ppr, "confidence": float(cand.confidence or 0.0),
    }
    total = sum([WEIGHTS[name] * value for name, value in comps.items()])
    if cand.status == CONFLICT:
        total *= CONFLICT_FACTOR
    fc.components = comps
    fc.score = total


def object_match(object_text: str, terms: AbstractSet[str],
                 names: AbstractSet[str] = frozenset()) -> float:
    """Share of the object's content words the query says (1: "call the plumber" for a
    query with "call" and "plumber"); words in ``names`` (of the people the query asks
    about) count on neither side."""
    if not terms:
        return 0.0
    words = _object_words(object_text) - names
    return len(words & terms) / len(words) if words else 0.0


@functools.lru_cache(maxsize=8192)
def _object_words(object_text: str) -> frozenset[str]:
    """An object's content words, stemmed (cached: a recall scores ~30 beliefs, mostly the
    same ones as the tenant's last recall)."""
    return frozenset(stem(w) for w in query_terms(object_text))


def relevant(fc: FactCandidate, open_slot: bool = True,
             evidence_turns: AbstractSet[str] = frozenset(), of_assistant: bool = False,
             kind: AbstractSet[str] = frozenset()) -> bool:
    """Whether the candidate answers what the query asks (see the module docstring).
    ``open_slot``: the query says nothing of the value it asks for beyond its subject and
    predicate; ``evidence_turns``: the turns of the best evidence items; ``of_assistant``:
    it asks what the assistant said ("the trail you recommended"), which no belief (the
    user's and named people's statements) answers unless it names the belief's object."""
    c = fc.components
    if of_assistant:
        return c["object"] > OBJECT_NAMED
    if c["subject"] and c["predicate"]:
        own = OWN_KINDS.get(fc.predicate)
        if open_slot and own is not None and not kind <= own:
            return _of_kind(fc, kind - own, evidence_turns)
        return open_slot or _one_of_many_corroborated(fc, evidence_turns)
    if c["object"] > OBJECT_NAMED:
        return True
    return bool(c["predicate"]) and bool(c["entity"] or c["keyword"] or _close_neighbour(fc))


def asked_subjects(about: Mapping[str, float], scored: Iterable[FactCandidate]) -> set[str]:
    """The entities the query asks about that are the subject of a candidate, and the user
    when it asks about the user ("where do I live?" whether or not memory knows): the
    people (and pets) it is about, not the places or things it names ("Denver" in "who
    lives in Denver?" is the subject of no belief)."""
    asked = {s for fc in scored if (s := fc.cand.subject_id) is not None and s in about}
    return asked | ({HUB} if HUB in about else set())


def about_someone_else(fc: FactCandidate, about: Mapping[str, float],
                       asked: AbstractSet[str]) -> bool:
    """Whether the candidate is about a subject the query does not ask about, when it asks
    about someone: "how many times has Melanie been to the beach?" is not answered by
    "Caroline visited the beach", nor "where does Luis live?" by where the user lives. A
    belief whose object is the one asked about stays ("who is Caroline's friend?":
    "Melanie is a friend of Caroline")."""
    if not asked or fc.cand.subject_id in about:
        return False
    return fc.cand.object_entity_id not in asked


def _one_of_many_corroborated(fc: FactCandidate, evidence_turns: AbstractSet[str]) -> bool:
    """A value of a many-valued slot ("the user bought ...", "Jon visited ...") answers a
    query that says what it wants ("what did I buy from a thrift store?") only when the
    query names some of its object, or when the turn it was drawn from is among the best
    evidence; a functional slot (lives_in, works_at) has one value, the answer."""
    spec = PREDICATES.get(fc.predicate)
    if (spec is not None and spec.functional) or fc.components["object"] > 0:
        return True
    return _corroborated(fc, evidence_turns)


def _of_kind(fc: FactCandidate, kind: AbstractSet[str], evidence_turns: AbstractSet[str]
             ) -> bool:
    """A value of a slot of many kinds ("Nate likes turtles", ``OWN_KINDS``) answers a query
    naming the kind of value it asks for ("what kind of books does Nate enjoy?") only when
    it is of that kind as far as memory can tell: its object names the kind ("favorite
    book: Dune"), it is among the query's closest dense neighbours, or the turn it was
    drawn from is among the best evidence (a keyword match says little: the subject's name
    and the verb match every value)."""
    return (not kind.isdisjoint(_object_words(fc.object_text)) or _close_neighbour(fc)
            or _corroborated(fc, evidence_turns))


def _close_neighbour(fc: FactCandidate) -> bool:
    """One of the ``DENSE_ONLY_TOP`` closest beliefs to the query vector."""
    dense_rank = fc.cand.ranks.get("belief_dense")
    return dense_rank is not None and dense_rank <= DENSE_ONLY_TOP


def _corroborated(fc: FactCandidate, evidence_turns: AbstractSet[str]) -> bool:
    """Drawn from a turn of the best evidence items the query matched directly."""
    return not evidence_turns.isdisjoint(fc.cand.turn_uids)


def _names(conn: Connection, tenant: str, entity_ids: Iterable[str]) -> dict[str, str]:
    ids = sorted(set(entity_ids))
    if not ids:
        return {}
    rows = conn.execute(f"SELECT entity_id, name FROM entities WHERE tenant = ? AND entity_id "
                        f"IN ({param_marks(len(ids))})", [tenant, *ids]).fetchall()
    out = {r[0]: r[1] for r in rows}
    if out.get(HUB, HUB) == HUB:
        out[HUB] = "the user"
    return out


def _earlier(conn: Connection, tenant: str, fc: FactCandidate) -> tuple[str, ...]:
    """Earlier values of a functional fact's slot that it (or a predecessor) replaced, most
    recent first: one range of ``ix_beliefs_subject``."""
    spec = PREDICATES.get(fc.predicate)
    if spec is None or not spec.functional or fc.cand.occurred_at is None:
        return ()
    rows = conn.execute(
        "SELECT object_text FROM beliefs INDEXED BY ix_beliefs_subject WHERE tenant = ? AND "
        f"subject_id = ? AND predicate = ? AND status = '{SUPERSEDED}' AND negated = 0 AND "
        "valid_to IS NOT NULL AND valid_to <= ? ORDER BY valid_from DESC LIMIT ?",
        (tenant, fc.cand.subject_id, fc.predicate, fc.cand.occurred_at,
         SUPERSEDED_SHOWN * 3)).fetchall()
    mine = normalize_object(fc.object_text)
    seen: dict[str, str] = {}
    for (text,) in rows:
        norm = normalize_object(text)
        if norm != mine and norm not in seen:
            seen[norm] = text
    return tuple(seen.values())[:SUPERSEDED_SHOWN]


def _speaker_source(cand: Candidate, stored: str) -> str:
    """Who stated it: the speaker of its turn, else the stored source (``imported`` ...)."""
    return cand.speaker or stored


def select(conn: Connection, scope: Scope, intent: Intent, named: Sequence[str],
           pool: Iterable[Candidate], ppr_scores: Mapping[Node, float],
           budget: int, evidence_turns: AbstractSet[str] = frozenset()) -> FactsOutcome:
    """Rank the belief candidates of ``pool`` plus the subject/predicate lookup, and keep the
    best ``budget`` as facts (handles 1..k). ``named``: the entities the query names (the
    hub among them when the query names the user)."""
    about = subjects(conn, scope, intent, named)
    beliefs = {c.key: c for c in pool if c.kind == "belief"}
    for rank, cand in enumerate(subject_lookup(conn, scope, about, intent.predicates), 1):
        existing = beliefs.setdefault(cand.key, cand)
        existing.ranks.setdefault(LIST, rank)
    top_ppr = max(ppr_scores.values(), default=0.0)
    named_set = frozenset(named)
    # The people the query names and asks about (subjects, as in ``asked_subjects``): their
    # names say whom it asks about, not which object ("Gina asked to remember: Jon, just do
    # it" is no answer to every question naming Jon).
    people = {s for c in beliefs.values()
              if (s := c.subject_id) is not None and s in about and s != HUB}
    # Every name this selection shows or reads, in one statement.
    known = _names(conn, scope.tenant,
                   {*named, HUB, *(c.subject_id or HUB for c in beliefs.values())})
    people_words = _name_words(people, known)
    scored: list[FactCandidate] = []
    for key, cand in beliefs.items():
        row = cand.claim  # loaded with the candidate (candidates._load_beliefs)
        if row is None or row[3] == SYSTEM_TOOL or row[2]:
            continue  # an ego anchor, or a negation (never a current belief)
        fc = FactCandidate(cand, *row)
        ppr = ppr_scores.get(key, 0.0) / top_ppr if top_ppr > 0 else 0.0
        score(fc, about, named_set, intent, ppr, people_words)
        scored.append(fc)
    asked = asked_subjects(about, scored)
    # The query leaves the slot open when it says nothing of the value but the names of whom
    # it asks about (read only when it says something else).
    open_slot = not intent.specifics or intent.specifics <= _name_words(asked, known)
    elsewhere = {id(fc) for fc in scored if about_someone_else(fc, about, asked)}
    of_assistant = ASSISTANT in intent.whose
    answers = {id(fc): id(fc) not in elsewhere
               and relevant(fc, open_slot, evidence_turns, of_assistant, intent.kind)
               for fc in scored}
    scored.sort(key=lambda f: (not answers[id(f)], -f.score, f.cand.row_id))
    reasons: dict[tuple[str, int], str] = {}
    kept: list[FactCandidate] = []
    seen: set[tuple[str | None, str, str]] = set()
    for fc in scored:
        fc.cand.score = fc.score
        fc.cand.components = dict(fc.components)
        if not answers[id(fc)]:
            reasons[fc.cand.key] = ("dropped: about someone else" if id(fc) in elsewhere
                                    else "dropped: not about the query")
            continue
        same = (fc.cand.subject_id, fc.predicate, normalize_object(fc.object_text))
        if same in seen:
            reasons[fc.cand.key] = "dropped: the same fact ranks higher"
        elif len(kept) >= budget:
            reasons[fc.cand.key] = "dropped: over the fact budget"
        else:
            seen.add(same)
            kept.append(fc)
            reasons[fc.cand.key] = f"kept: fact {len(kept)}"
    facts = tuple(_fact(i, fc, known, _earlier(conn, scope.tenant, fc))
                  for i, fc in enumerate(kept, start=1))
    return FactsOutcome(facts, [f.cand for f in scored], reasons, [f.cand for f in kept])


def _name_words(entity_ids: Iterable[str], names: Mapping[str, str]) -> frozenset[str]:
    """The stemmed words of the names of ``entity_ids`` (as ``Intent`` stems query words)."""
    return frozenset(stem(w) for e in entity_ids for w in words(names.get(e, "")))


def _other_speaker(cand: Candidate, subject: str, names: Mapping[str, str]) -> str | None:
    """Who said the fact when that is not its subject ("Elin likes my cooking", said by the
    user), by name; None when the subject said it (or no one is known to have)."""
    if cand.speaker is None:
        return None
    if speaker_role(cand.speaker) == USER:
        return None if (cand.subject_id or HUB) == HUB else names.get(HUB, "the user")
    return None if normalize_label(cand.speaker) == normalize_label(subject) else cand.speaker


def _fact(handle: int, fc: FactCandidate, names: Mapping[str, str],
          earlier: tuple[str, ...]) -> RecallFact:
    cand = fc.cand
    subject = names.get(cand.subject_id or HUB, cand.subject_id or HUB)
    text = fact_text(subject, fc.predicate, fc.object_text, _other_speaker(cand, subject, names))
    return RecallFact(
        handle=handle, fact_id=cand.item_id, subject=subject, predicate=fc.predicate,
        object=fc.object_text, text=text,
        valid_from=cand.occurred_at, valid_to=fc.valid_to,
        confidence=float(cand.confidence or 0.0), source=_speaker_source(cand, fc.source),
        turn_uids=cand.turn_uids, score=fc.score, components=dict(fc.components),
        superseded=earlier, status=cand.status or "active")
