"""Conversations for the facts tests, and a runner that writes them the way a worker does
(``process_turn`` = record + extract + apply, then ``anchor_turn`` and ``micro_consolidate``,
turn by turn) into a fresh store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.db import migrate_stores, open_state
from memory_core.embedders.factory import make_embedder
from memory_core.extraction.api import Extractor
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write import pipeline

# A 32-turn chat: Maya (the user) lives in Boston, talks about her brother in Chicago, a
# friend in Austin, her cat, work, then moves to Denver. Old turns about Boston are many;
# the current city is said twice, late.
MAYA_USER = (
    "Hi, I'm Maya. I live in Boston and I work at Harbor Labs as a data analyst.",
    "My brother Tom lives in Chicago, he visits every winter.",
    "Boston winters are brutal, I spend most weekends inside reading.",
    "My friend Priya lives in Austin and keeps telling me to move south.",
    "I have a cat named Pixel who sleeps on my keyboard.",
    "Work has been hectic, Harbor Labs is launching a new dashboard.",
    "I'm thinking about leaving Boston, the rent keeps going up.",
    "Denver came up as an option, a friend says the hiking is great.",
    "I got an offer from Peak Analytics in Denver!",
    "I accepted it. I'm moving to Denver in June.",
    "Packing is chaos. Pixel hates the boxes.",
    "I moved to Denver last week, the apartment is near Washington Park.",
    "I live in Denver now. The altitude takes getting used to.",
    "My first week went well, I work at Peak Analytics on the forecasting team.",
    "Tom says Chicago misses me, but Denver feels right.",
    "Priya wants to visit Denver in the fall.",
)
MAYA_ASSISTANT = (
    "Nice to meet you, Maya! How do you like Boston?",
    "Chicago in winter sounds cold too.",
    "Reading weekends sound cozy.",
    "Austin is warm, that is tempting.",
    "Pixel sounds adorable.",
    "Good luck with the launch.",
    "Rent in Boston is high, that is true.",
    "Denver has great trails nearby.",
    "Congratulations on the offer!",
    "June is a good month to move.",
    "Cats often dislike moving boxes.",
    "Washington Park is lovely.",
    "Drink lots of water for the altitude.",
    "Forecasting sounds interesting.",
    "It is good that Denver feels right.",
    "Fall in Denver is beautiful.",
)


def maya_turns(tenant: str) -> list[dict[str, Any]]:
    """The 32 turns, ten days apart per exchange, four exchanges per chat session."""
    t0 = datetime(2024, 1, 10, 18, 0, tzinfo=UTC)
    out = []
    for i, (user, assistant) in enumerate(zip(MAYA_USER, MAYA_ASSISTANT, strict=True)):
        for speaker, text in (("user", user), ("assistant", assistant)):
            n = len(out)
            out.append({"tenant": tenant, "session_id": f"s{i // 4}", "turn_uid": f"m{n:02d}",
                        "speaker": speaker, "text": text, "index": n,
                        "occurred_at": t0 + timedelta(days=10 * i, minutes=n)})
    return out


def write_like_a_worker(settings: Settings, tenant: str, turns: Iterable[Mapping[str, Any]],
                        extractor: Extractor | None = None) -> None:
    """Migrate, create ``tenant`` and write ``turns`` through the workers' pipeline (with
    ``extractor``: instead of the default one)."""
    migrate_stores(settings)
    db = open_state(settings, migrate=False)
    try:
        index = VectorIndex(make_embedder(settings))
        create_tenant(db.conn, tenant)
        for turn in turns:
            pipeline.process_turn(db, index, turn, extractor=extractor)
            pipeline.anchor_turn(db, index, tenant, turn["turn_uid"])
            pipeline.micro_consolidate(db, index, tenant, turn["session_id"],
                                       turn_uid=turn["turn_uid"])
    finally:
        db.close()


def store(data_dir: Path, **overrides: Any) -> Settings:
    return Settings.from_env({}, data_dir=data_dir, log_level="error", **overrides)
