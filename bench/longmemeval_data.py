"""LongMemEval_S for retrieval scoring: questions, their haystacks as turns, the metric.

See ../shared/data/longmemeval/README.md. One tenant per question; sessions in date order;
a turn's time is its session's date (plus its index in seconds, to keep order), its uid
``<session id>:<index>``, its speaker the role (``user`` / ``assistant``). Empty turns are
skipped. Evidence turns are the ones marked ``has_answer``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_report import mean_table

TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
         "multi-session", "knowledge-update", "temporal-reasoning")


@dataclass(frozen=True)
class Turn:
    uid: str
    session: str
    idx: int
    speaker: str
    text: str
    at: datetime

    def day(self) -> str:
        return f"{self.at.day} {self.at:%B %Y}"


@dataclass(frozen=True)
class Question:
    qid: str
    qtype: str
    text: str
    at: datetime
    turns: tuple[Turn, ...]
    evidence: tuple[str, ...]
    evidence_sessions: tuple[str, ...]

    @property
    def tenant(self) -> str:
        return "lme-" + re.sub(r"[^a-z0-9_.-]", "-", self.qid.lower())


def parse_date(text: str) -> datetime:
    """ "2023/05/20 (Sat) 02:21" -> an aware UTC datetime."""
    return datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", text.strip()),
                             "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def _turns(raw: dict) -> list[Turn]:
    sessions = sorted(zip(raw["haystack_dates"], raw["haystack_session_ids"],
                          raw["haystack_sessions"], strict=True),
                      key=lambda s: parse_date(s[0]))
    out = []
    for date, sid, turns in sessions:
        at = parse_date(date)
        for i, t in enumerate(turns):
            text = str(t.get("content", "")).strip()
            if text:
                out.append(Turn(f"{sid}:{i}", sid, i, str(t["role"]), text,
                                at + timedelta(seconds=i)))
    return out


def load(path: Path, limit: int | None = None) -> list[Question]:
    """The questions (the first ``limit`` of each type when given, in file order)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    per_type: dict[str, int] = {}
    out = []
    for raw in data:
        qtype = str(raw["question_type"])
        per_type[qtype] = per_type.get(qtype, 0) + 1
        if limit is not None and per_type[qtype] > limit:
            continue
        turns = _turns(raw)
        evidence = tuple(f"{sid}:{i}" for date, sid, sess in zip(
            raw["haystack_dates"], raw["haystack_session_ids"], raw["haystack_sessions"],
            strict=True) for i, t in enumerate(sess)
            if t.get("has_answer") and str(t.get("content", "")).strip())
        out.append(Question(str(raw["question_id"]), qtype, str(raw["question"]),
                            parse_date(raw["question_date"]), tuple(turns), evidence,
                            tuple(raw["answer_session_ids"])))
    return out


class Scores:
    """Turn Recall@5/@10 and session recall_all@5 per question type, averaged."""

    KS = (5, 10)

    def __init__(self) -> None:
        self.rows: list[tuple[str, dict[str, float]]] = []

    def add(self, q: Question, ranked: list[str]) -> None:
        """``ranked``: turn uids in rank order, without repeats."""
        ev = set(q.evidence)
        row: dict[str, float] = {}
        for k in self.KS:
            row[f"R@{k}"] = len(set(ranked[:k]) & ev) / len(ev) if ev else 0.0
        sessions = {u.rsplit(":", 1)[0] for u in ranked[:5]}
        row["S_all@5"] = 1.0 if set(q.evidence_sessions) <= sessions else 0.0
        self.rows.append((q.qtype, row))

    def table(self) -> dict[str, dict[str, float]]:
        groups = {t: [r for tt, r in self.rows if tt == t] for t in TYPES}
        groups["overall"] = [r for _, r in self.rows]
        return mean_table(groups)
