"""Belief ranking measured: does recall show the CURRENT fact, for the right person?

Example:
    .venv/bin/python bench/facts.py
    .venv/bin/python bench/facts.py --embedder fastembed \\
        --model-path ../shared/models/all-MiniLM-L6-v2-onnx --json-out /tmp/facts.json

Reads ``tests/data/facts_conversations.json`` (hand-written chats, our own data), writes each
conversation into its own tenant of ONE store through the workers' write path (per turn:
``process_turn``, then the follow-ups a worker runs: ``anchor_turn`` when beliefs were drawn
and ``micro_consolidate``), then asks every question with ``Memory.recall`` and reads
``result.facts``. A reported fact matches the question when its subject is the question's
(``user`` also matches the user's stated name) and its object holds an expected value
(whole words, case-insensitive). Metrics:

- ``top3``: the current value is in the top-3 facts (target >= 0.9);
- ``superseded``: share of questions where a superseded value of the asked slot is shown
  among the facts as current (target 0);
- ``wrong_person``: share of questions where a fact of another subject in the asked slot
  ranks above the right one, within the top 3 (target <= 0.05).

It also prints the extraction ceiling, read from the store without any ranking: the answer
present among the currently valid beliefs, and a superseded value still valid. Questions are
failures with their ids (and text: the set is ours, not user data).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench_report import run_and_report  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.clock import to_db  # noqa: E402
from memory_core.db import migrate_stores, open_state  # noqa: E402
from memory_core.db.stores import Database  # noqa: E402
from memory_core.embedders.factory import make_embedder  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.model.turns import TurnInput  # noqa: E402
from memory_core.recall.candidates import Scope, belief_filter  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402
from memory_core.write import pipeline  # noqa: E402

DEFAULT_DATA = REPO_ROOT / "tests" / "data" / "facts_conversations.json"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
TOP = 3
TARGETS = {"top3": 0.9, "superseded": 0.0, "wrong_person": 0.05}
SELF = frozenset({"user", "the user"})


# --- the data ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    subject: str
    slot: tuple[str, ...]
    expected: tuple[str, ...]
    superseded: tuple[str, ...]
    category: str


@dataclass(frozen=True)
class Conversation:
    cid: str
    user_name: str
    turns: tuple[TurnInput, ...]
    questions: tuple[Question, ...]

    @property
    def tenant(self) -> str:
        return f"facts-{self.cid}"

    @property
    def now(self) -> datetime:
        """When the questions are asked: a day after the last turn."""
        return max(t.occurred_at for t in self.turns) + timedelta(days=1)  # type: ignore[operator]


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def load(path: Path = DEFAULT_DATA) -> list[Conversation]:
    """The conversations of the case file, each turn a ``TurnInput`` of its own tenant."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for c in doc["conversations"]:
        start, turns = _when(c["start"]), []
        for s_no, session in enumerate(c["sessions"]):
            at = start + timedelta(days=session["day"])
            for i, (speaker, text) in enumerate(session["turns"]):
                turns.append(TurnInput(
                    tenant=f"facts-{c['id']}", session_id=f"{c['id']}-s{s_no}",
                    turn_uid=f"{c['id']}-s{s_no}-t{i:02d}", speaker=speaker, text=text,
                    occurred_at=at + timedelta(minutes=i), index=i))
        questions = tuple(Question(
            q["id"], q["q"], q["subject"], tuple(q["slot"]), tuple(q["expected"]),
            tuple(q["superseded"]), q["category"]) for q in c["questions"])
        out.append(Conversation(c["id"], c.get("user_name", ""), tuple(turns), questions))
    return out


# --- matching ------------------------------------------------------------------------------
def norm(text: str) -> str:
    words = text.casefold().replace("’", "'").replace(".", " ").strip(" ,!?").split()
    if len(words) > 1 and words[0] in ("the", "a", "an"):
        words = words[1:]
    return " ".join(words)


def holds(obj: str, value: str) -> bool:
    """``value`` is the object or a whole-word part of it ("Seattle" in "visit her in Seattle")."""
    o, v = norm(obj), norm(value)
    return bool(v) and (o == v or re.search(rf"(?<![\w']){re.escape(v)}(?![\w'])", o) is not None)


@dataclass(frozen=True)
class Fact:
    """What the bench reads of a fact, from ``result.facts`` or from the store."""

    subject: str
    predicate: str
    object: str


def is_subject(fact: Fact, q: Question, user_name: str) -> bool:
    s = norm(fact.subject)
    if q.subject == "user":
        return s in SELF or (bool(user_name) and s == norm(user_name))
    return s == norm(q.subject)


def is_right(fact: Fact, q: Question, user_name: str) -> bool:
    return is_subject(fact, q, user_name) and any(holds(fact.object, v) for v in q.expected)


def is_stale(fact: Fact, q: Question, user_name: str) -> bool:
    """A superseded value of the asked slot shown as current (and not also the new one)."""
    return (is_subject(fact, q, user_name) and fact.predicate in q.slot
            and any(holds(fact.object, v) for v in q.superseded)
            and not any(holds(fact.object, v) for v in q.expected))


def is_other(fact: Fact, q: Question, user_name: str) -> bool:
    return fact.predicate in q.slot and not is_subject(fact, q, user_name)


@dataclass(frozen=True)
class Outcome:
    qid: str
    category: str
    top3: bool
    stale: bool
    wrong_person: bool
    rank: int | None  # 1-based rank of the first right fact


def judge(q: Question, user_name: str, facts: Sequence[Fact]) -> Outcome:
    right = next((i for i, f in enumerate(facts) if is_right(f, q, user_name)), None)
    other = next((i for i, f in enumerate(facts) if is_other(f, q, user_name)), None)
    wrong = other is not None and other < TOP and (right is None or other < right)
    return Outcome(q.qid, q.category, right is not None and right < TOP,
                   any(is_stale(f, q, user_name) for f in facts), wrong,
                   None if right is None else right + 1)


@dataclass
class Tally:
    n: int = 0
    top3: int = 0
    stale: int = 0
    wrong: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.n += 1
        self.top3 += o.top3
        self.stale += o.stale
        self.wrong += o.wrong_person
        if not o.top3 or o.stale or o.wrong_person:
            self.failures.append(o.qid)

    def rates(self) -> dict[str, float]:
        n = max(1, self.n)
        return {"top3": self.top3 / n, "superseded": self.stale / n,
                "wrong_person": self.wrong / n}


# --- write path and readers ----------------------------------------------------------------
def ingest(db: Database, index: VectorIndex, conv: Conversation) -> int:
    """Every turn through the workers' steps; returns the number of beliefs drawn."""
    create_tenant(db.conn, conv.tenant)
    drawn = 0
    for turn in conv.turns:
        outcome = pipeline.process_turn(db, index, turn)
        if outcome.belief_ids:
            drawn += len(outcome.belief_ids)
            pipeline.anchor_turn(db, index, conv.tenant, turn.turn_uid)
        pipeline.micro_consolidate(db, index, conv.tenant, turn.session_id,
                                   turn_uid=turn.turn_uid)
    return drawn


def stored_facts(db: Database, conv: Conversation) -> list[Fact]:
    """Every belief valid at ``conv.now`` (the store, unranked: the extraction ceiling)."""
    cond, params = belief_filter(Scope(conv.tenant, to_db(conv.now)))
    rows = db.conn.execute(
        f"SELECT e.name, b.predicate, b.object_text FROM beliefs b JOIN entities e ON "
        f"e.tenant = b.tenant AND e.entity_id = b.subject_id WHERE {cond} AND b.negated = 0",
        params).fetchall()
    return [Fact(r[0], r[1], r[2]) for r in rows]


def recalled_facts(result: Any) -> list[Fact]:
    return [Fact(f.subject, f.predicate, f.object) for f in result.facts]


# --- the run -------------------------------------------------------------------------------
def _settings(args: argparse.Namespace, data_dir: Path) -> Settings:
    kw: dict[str, Any] = {"data_dir": data_dir, "embedder": args.embedder,
                          "log_level": "warning"}
    if args.embedder == "fastembed":
        kw["embed_model"] = MODEL_NAME
        if args.model_path:
            kw["embed_model_path"] = args.model_path.resolve()
    return Settings.from_env({}, **kw)


def _tally(outcomes: Iterable[Outcome]) -> dict[str, Tally]:
    out: dict[str, Tally] = {"all": Tally()}
    for o in outcomes:
        out["all"].add(o)
        out.setdefault(o.category, Tally()).add(o)
    return out


def run(args: argparse.Namespace, data_dir: Path,
        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    settings = _settings(args, data_dir)
    configure_logging(settings)
    embedder = make_embedder(settings)
    convs = load(args.data)
    migrate_stores(settings)
    started = time.perf_counter()
    db = open_state(settings)
    drawn = 0
    try:
        index = VectorIndex(embedder)
        index.ensure(db.conn)
        for conv in convs:
            drawn += ingest(db, index, conv)
        ingest_s = time.perf_counter() - started
        ceiling = [judge_store(q, conv, stored_facts(db, conv))
                   for conv in convs for q in conv.questions]
    finally:
        db.close()
    recalled: list[Outcome] = []
    shown: dict[str, list[str]] = {}
    with Memory.open(settings, embedder=embedder) as mem:
        for conv in convs:
            for q in conv.questions:
                result = mem.recall(q.text, tenant=conv.tenant, now=conv.now)
                facts = recalled_facts(result)
                recalled.append(judge(q, conv.user_name, facts))
                shown[q.qid] = [f"{f.subject} | {f.predicate} | {f.object}" for f in facts[:TOP]]
    texts = {q.qid: q.text for c in convs for q in c.questions}
    rec, ceil = _tally(recalled), _tally(ceiling)
    return {
        "embedder": embedder.identity, "conversations": len(convs),
        "turns": sum(len(c.turns) for c in convs), "questions": len(texts),
        "beliefs_drawn": drawn, "ingest_seconds": round(ingest_s, 2),
        "recall": {k: {"n": t.n, **t.rates()} for k, t in rec.items()},
        "ceiling": {k: {"n": t.n, **t.rates()} for k, t in ceil.items()},
        "failures": {qid: texts[qid] for qid in rec["all"].failures},
        "ceiling_failures": {qid: texts[qid] for qid in ceil["all"].failures},
        "outcomes": [o.__dict__ for o in recalled],
        "top_facts": {qid: shown[qid] for qid in rec["all"].failures},
    }


def judge_store(q: Question, conv: Conversation, facts: Sequence[Fact]) -> Outcome:
    """The ceiling: right = the answer is among the subject's valid beliefs in the slot."""
    slot = [f for f in facts if f.predicate in q.slot or is_right(f, q, conv.user_name)]
    right = any(is_right(f, q, conv.user_name) for f in slot)
    stale = any(is_stale(f, q, conv.user_name) for f in slot)
    return Outcome(q.qid, q.category, right, stale, False, 1 if right else None)


def _print(report: dict[str, Any]) -> None:
    print(f"embedder {report['embedder']}  conversations {report['conversations']}  turns "
          f"{report['turns']}  questions {report['questions']}  beliefs drawn "
          f"{report['beliefs_drawn']}  ingest {report['ingest_seconds']} s")
    for name, title in (("ceiling", "extraction ceiling (store, unranked: answer valid / "
                                    "superseded still valid)"),
                        ("recall", "recall result.facts")):
        print(f"\n{title}")
        print("| category | n | top3 | superseded | wrong_person |\n|---|---:|---:|---:|---:|")
        for cat, row in sorted(report[name].items(), key=lambda kv: (kv[0] != "all", kv[0])):
            print(f"| {cat} | {row['n']} | {row['top3']:.3f} | {row['superseded']:.3f} | "
                  f"{row['wrong_person']:.3f} |")
    for name in ("ceiling_failures", "failures"):
        print(f"\n{name} ({len(report[name])}):")
        for qid, text in report[name].items():
            print(f"  {qid}: {text}")
            for line in report["top_facts"].get(qid, []) if name == "failures" else ():
                print(f"      {line}")
    r = report["recall"]["all"]
    print(f"\nfacts top3={r['top3']:.3f} superseded={r['superseded']:.3f} "
          f"wrong_person={r['wrong_person']:.3f} (targets >= {TARGETS['top3']}, "
          f"{TARGETS['superseded']}, <= {TARGETS['wrong_person']})")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--embedder", choices=("hash", "fastembed"), default="hash")
    p.add_argument("--model-path", type=Path, default=None)
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--data-dir", type=Path, default=None,
                   help="keep the databases here (default: a temporary folder)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run_and_report(_args(argv), "mnemo-facts-", run, _print)


if __name__ == "__main__":
    main()
