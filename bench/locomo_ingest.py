"""Feed a LoCoMo conversation into memory turn by turn, through the workers' write path.

Each conversation is one tenant; both speakers are users of it; a turn's time is its
session's date (plus its index in seconds, to keep order); its uid is its dia_id and its chat
session ``session_<N>``. Until ``memory_core.write.pipeline`` exists, ``_direct`` writes turns and
one-turn episodes with SQL (no beliefs), which is what record_turn alone would leave.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

from locomo_data import Conversation, day_label

from memory_core.clock import to_db
from memory_core.db import open_state
from memory_core.db.sqlite import atomic
from memory_core.db.stores import Database
from memory_core.embedders.base import Embedder
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex


def write_path() -> str:
    """``pipeline`` when the workers' write path is importable, else ``direct``."""
    try:
        importlib.import_module("memory_core.write.pipeline")
        importlib.import_module("memory_core.extraction.heuristic")
    except ImportError:
        return "direct"
    return "pipeline"


def ingest(settings: Settings, conv: Conversation, embedder: Embedder) -> str:
    """Write every turn of ``conv``; returns which write path was used."""
    path = write_path()
    db = open_state(settings)
    try:
        index = VectorIndex(embedder)
        index.ensure(db.conn)
        create_tenant(db.conn, conv.tenant)
        if path == "pipeline":
            _pipeline(db, index, conv)
        else:
            _direct(db.conn, index, conv)
    finally:
        db.close()
    return path


def _turns(conv: Conversation) -> list[dict[str, Any]]:
    out = []
    for session, turn in conv.turns():
        idx = int(turn.dia_id.split(":")[1])
        out.append({"uid": turn.dia_id, "session": f"session_{session.number}", "idx": idx,
                    "speaker": turn.speaker, "text": turn.text,
                    "at": session.at + timedelta(seconds=idx), "day": day_label(session.at)})
    return out


def _pipeline(db: Database, index: VectorIndex, conv: Conversation) -> None:
    """What the workers do per turn: record + extract + anchor (process_turn), then
    micro-consolidation of the turn's session and subjects."""
    pipeline = importlib.import_module("memory_core.write.pipeline")
    turns_mod = importlib.import_module("memory_core.model.turns")
    for t in _turns(conv):
        turn = turns_mod.TurnInput(tenant=conv.tenant, session_id=t["session"],
                                   turn_uid=t["uid"], speaker=t["speaker"], text=t["text"],
                                   occurred_at=t["at"], index=t["idx"])
        pipeline.process_turn(db, index, turn)
        pipeline.micro_consolidate(db, index, conv.tenant, t["session"], turn_uid=t["uid"])


def _direct(conn: Any, index: VectorIndex, conv: Conversation) -> None:
    turns = _turns(conv)
    texts = [f"[{t['day']}] {t['speaker']}: {t['text']}" for t in turns]
    vectors = index.embedder.embed(texts)
    with atomic(conn):
        for t, text, vec in zip(turns, texts, vectors, strict=True):
            when = to_db(t["at"])
            cur = conn.execute(
                "INSERT INTO turns (tenant, turn_uid, session_id, idx, speaker, occurred_at, "
                "text, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (conv.tenant, t["uid"], t["session"], t["idx"], t["speaker"], when, t["text"],
                 when))
            turn_id = cur.lastrowid
            cur = conn.execute(
                "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at,"
                " importance, created_at, updated_at) VALUES (?, ?, ?, 'long_term', ?, ?, 0.5,"
                " ?, ?)", (conv.tenant, f"ep_{t['uid']}", t["session"], text, when, when, when))
            conn.execute("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                         (cur.lastrowid, turn_id))
            index.upsert(conn, "episodes", [(cur.lastrowid, conv.tenant, vec)])
