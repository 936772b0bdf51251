"""LoCoMo for retrieval scoring: conversations, questions with clean evidence, the metric.

See ../shared/data/locomo/README.md: categories 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop (5, adversarial, is skipped). Evidence ids are normalised ("D8:6; D9:17" is two
ids, "D:11:26" is D11:26, "D30:05" is D30:5); ids naming no turn are dropped, and so is a
question left with none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench_report import mean_table

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_DIA_RE = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    at: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def tenant(self) -> str:
        return re.sub(r"[^a-z0-9_.-]", "-", self.sample_id.lower())

    def turns(self) -> list[tuple[Session, Turn]]:
        return [(s, t) for s in self.sessions for t in s.turns]


def parse_session_date(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def day_label(at: datetime) -> str:
    return f"{at.day} {at:%B %Y}"


def turn_text(raw: dict) -> str:
    text = str(raw.get("text", "")).strip()
    caption = raw.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo of {str(caption).strip()}]".strip()
    return text


def normalise_evidence(items: list[str], known: set[str]) -> tuple[str, ...]:
    ids: dict[str, None] = {}
    for item in items:
        for part in re.split(r"[;,]", str(item)):
            m = _DIA_RE.search(part.replace(" ", ""))
            if m:
                dia = f"D{int(m.group(1))}:{int(m.group(2))}"
                if dia in known:
                    ids.setdefault(dia, None)
    return tuple(ids)


def _sessions(conv: dict) -> list[Session]:
    out = []
    for key, value in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if not m or not isinstance(value, list):
            continue
        n = int(m.group(1))
        turns = tuple(Turn(str(t["dia_id"]), str(t["speaker"]), turn_text(t)) for t in value)
        out.append(Session(n, parse_session_date(conv[f"session_{n}_date_time"]), turns))
    return sorted(out, key=lambda s: s.number)


def load(path: Path) -> list[Conversation]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for sample in data:
        conv = sample["conversation"]
        sessions = _sessions(conv)
        known = {t.dia_id for s in sessions for t in s.turns}
        questions = []
        for qa in sample["qa"]:
            category = int(qa["category"])
            if category not in CATEGORIES:
                continue
            evidence = normalise_evidence(qa.get("evidence", []), known)
            if evidence:
                questions.append(Question(str(qa["question"]), category, evidence))
        out.append(Conversation(str(sample["sample_id"]), (conv["speaker_a"], conv["speaker_b"]),
                                tuple(sessions), tuple(questions)))
    return out


def first_turns(ranked: list[list[str]], k: int) -> list[str]:
    """The first ``k`` distinct turns of items in rank order (an item may use several)."""
    seen: dict[str, None] = {}
    for turns in ranked:
        for t in turns:
            seen.setdefault(t, None)
    return list(seen)[:k]


class Scores:
    """Evidence Recall@k and All@k per category, averaged over questions."""

    KS = (5, 10, 20)

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, float]]] = []

    def add(self, category: int, ranked: list[list[str]], evidence: tuple[str, ...]) -> None:
        ev = set(evidence)
        row = {}
        for k in self.KS:
            got = set(first_turns(ranked, k)) & ev
            row[f"R@{k}"] = len(got) / len(ev)
        row["All@10"] = 1.0 if row["R@10"] == 1.0 else 0.0
        self.rows.append((category, row))

    def table(self) -> dict[str, dict[str, float]]:
        groups = {CATEGORIES[c]: [r for cc, r in self.rows if cc == c] for c in CATEGORIES}
        groups["overall"] = [r for _, r in self.rows]
        return mean_table(groups)
