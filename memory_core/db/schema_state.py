"""Schema of ``memory_state.db`` (hot): the memory itself.

SQLAlchemy Core metadata is the description of the current schema; the numbered migrations
in ``migrations.py`` create it. Virtual tables (FTS5, sqlite-vec) cannot be described by
metadata and are created by the migrations and ``memory_core.vectors``. Datetimes are stored
as fixed-width ISO text (``memory_core.clock``). Every memory row carries its tenant.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from memory_core.db import fts as fts_tables
from memory_core.db.schema_common import bookkeeping_tables
from memory_core.vocabulary import SOURCES, STATUSES, TIERS, sql_list

metadata = MetaData()

# Commitments (memory_core.model.predicates) that are still open: what commitment_gc pages
# through. Literal SQL shared by the partial index and the query, so the planner can use it.
OPEN_COMMITMENTS_SQL = ("predicate IN ('plans_to', 'committed_to', 'reminder') "
                        "AND status IN ('active', 'conflict')")

def _in(column: str, values: tuple[str, ...]) -> CheckConstraint:
    return CheckConstraint(f"{column} IN ({sql_list(values)})", name=f"ck_{column}")


meta, schema_migrations = bookkeeping_tables(metadata)

tenants = Table(
    "tenants", metadata,
    Column("tenant", Text, primary_key=True),
    Column("created_at", Text, nullable=False),
)

turns = Table(
    "turns", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, ForeignKey("tenants.tenant"), nullable=False),
    Column("turn_uid", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("speaker", Text, nullable=False),
    Column("occurred_at", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("recorded_at", Text, nullable=False),
    UniqueConstraint("tenant", "turn_uid"),
    Index("ix_turns_session", "tenant", "session_id", "idx"),
)

episodes = Table(
    "episodes", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, ForeignKey("tenants.tenant"), nullable=False),
    Column("episode_uid", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("tier", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("occurred_at", Text, nullable=False),
    Column("importance", Float, nullable=False),
    Column("access_count", Integer, nullable=False, server_default="0"),
    Column("last_access_at", Text),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("expires_at", Text),
    Column("decayed_at", Text),  # importance decayed up to this time (macro_sleep)
    UniqueConstraint("tenant", "episode_uid"),
    _in("tier", TIERS),
    Index("ix_episodes_tier", "tenant", "tier", "occurred_at"),
    Index("ix_episodes_session", "tenant", "session_id"),
    Index("ix_episodes_expires", "tenant", "expires_at",
          sqlite_where=text("expires_at IS NOT NULL")),
)

# An episode covers one turn or a merged run of turns; every episode points back to them.
episode_turns = Table(
    "episode_turns", metadata,
    Column("episode_id", Integer, ForeignKey("episodes.id", ondelete="CASCADE"),
           primary_key=True),
    Column("turn_id", Integer, ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True),
    Index("ix_episode_turns_turn", "turn_id"),
)

entities = Table(
    "entities", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, ForeignKey("tenants.tenant"), nullable=False),
    Column("entity_id", Text, nullable=False),  # stable canonical id; the hub is "user"
    Column("name", Text, nullable=False),
    Column("kind", Text, nullable=False, server_default="thing"),
    Column("belief_count", Integer, nullable=False, server_default="0"),
    Column("graph_degree", Integer, nullable=False, server_default="0"),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    UniqueConstraint("tenant", "entity_id"),
)

entity_aliases = Table(
    "entity_aliases", metadata,
    Column("tenant", Text, nullable=False, primary_key=True),
    Column("alias_norm", Text, nullable=False, primary_key=True),
    Column("entity_id", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Index("ix_entity_aliases_entity", "tenant", "entity_id"),
)

def _merge_columns() -> list[Column]:
    """The merge ledger's columns, shared by the live ledger and its archive."""
    return [
        Column("id", Integer, primary_key=True),
        Column("tenant", Text, nullable=False),
        Column("from_entity_id", Text, nullable=False),
        Column("into_entity_id", Text, nullable=False),
        Column("from_name", Text, nullable=False),
        Column("beliefs_rewired", Integer, nullable=False),
        Column("merged_at", Text, nullable=False),
    ]


entity_merges = Table(
    "entity_merges", metadata, *_merge_columns(),
    Index("ix_entity_merges_tenant", "tenant", "into_entity_id"),
)

# Rows move here before any row they refer to is dropped (see memory_core/model/merges.py).
entity_merges_archive = Table(
    "entity_merges_archive", metadata, *_merge_columns(),
    Column("archived_at", Text, nullable=False),
)

beliefs = Table(
    "beliefs", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, ForeignKey("tenants.tenant"), nullable=False),
    Column("belief_uid", Text, nullable=False),  # content key: same content -> same uid
    Column("subject_id", Text, nullable=False),  # entities.entity_id
    Column("predicate", Text, nullable=False),
    Column("object_text", Text, nullable=False),
    Column("object_norm", Text, nullable=False, server_default=""),  # see belief_rules
    Column("object_entity_id", Text),  # when the object is an entity, not a payload literal
    Column("negated", Integer, nullable=False, server_default="0"),  # "no longer ..." statement
    Column("text", Text, nullable=False),  # rendered "subject predicate object" for search
    Column("valid_from", Text, nullable=False),
    Column("valid_to", Text),
    Column("stated_valid_to", Text),  # an end given by the statement (a plan's deadline)
    Column("recorded_at", Text, nullable=False),
    Column("retired_at", Text),
    Column("status", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("turn_uid", Text),
    Column("expires_at", Text),  # retention date
    Column("access_count", Integer, nullable=False, server_default="0"),  # times recalled
    Column("last_access_at", Text),
    UniqueConstraint("tenant", "belief_uid"),
    _in("status", STATUSES),
    _in("source", SOURCES),
    CheckConstraint("confidence >= 0 AND confidence <= 1", name="ck_confidence"),
    Index("ix_beliefs_subject", "tenant", "subject_id", "predicate", "status"),
    Index("ix_beliefs_object", "tenant", "object_entity_id"),
    Index("ix_beliefs_turn", "tenant", "turn_uid"),
    # Partial indexes: only the rows the maintenance jobs look for, so recall's plans never
    # see them (a query can use one only when its WHERE implies the index's).
    Index("ix_beliefs_expires", "tenant", "expires_at",
          sqlite_where=text("expires_at IS NOT NULL")),
    Index("ix_beliefs_open_commitments", "tenant", "id",
          sqlite_where=text(OPEN_COMMITMENTS_SQL)),
    Index("ix_beliefs_pending", "tenant", "id", sqlite_where=text("status = 'pending_review'")),
)

hygiene_rejections = Table(
    "hygiene_rejections", metadata,
    Column("tenant", Text, primary_key=True),
    Column("reason", Text, primary_key=True),
    Column("count", Integer, nullable=False),
    Column("last_at", Text, nullable=False),
)

# Change outbox for the mirrors (Postgres, Neo4j): appended in the same transaction as the
# change; a mirror's cursor (in memory_ops.db) moves only after the sink confirms.
outbox = Table(
    "outbox", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, nullable=False),
    Column("kind", Text, nullable=False),  # belief | entity | episode
    Column("object_id", Text, nullable=False),
    Column("op", Text, nullable=False),  # upsert | delete
    Column("created_at", Text, nullable=False),
)

# Idempotency keys, written in the same transaction as the effect they guard.
applied_jobs = Table(
    "applied_jobs", metadata,
    Column("key", Text, primary_key=True),
    Column("applied_at", Text, nullable=False),
)

# What remains of a verified delete: a digest, never the text.
tombstones = Table(
    "tombstones", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("digest", Text, nullable=False),
    Column("deleted_at", Text, nullable=False),
    Column("reason", Text, nullable=False),
)

# Each tenant's rows and tokens in each full-text index (``memory_core.db.fts``): the N and
# average length of that tenant's own bm25. Kept by the FTS triggers.
fts_stats = Table(
    "fts_stats", metadata,
    Column("tbl", Text, primary_key=True),
    Column("tenant", Text, primary_key=True),
    Column("rows", Integer, nullable=False),
    Column("tokens", Integer, nullable=False),
)

# Full-text indexes over the text columns (``memory_core.db.fts``): one per table, every
# token in its tenant's namespace, kept in step by triggers in the same transaction.
# fts table -> base table (column "text", rowid "id"); kept in db.fts, which the CLI's first
# import loads without SQLAlchemy.
FTS_TABLES = fts_tables.FTS_TABLES
# The tokenizer of the first (shared-statistics) indexes, made by state migration 1.
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

# Base tables whose rows have embeddings in sqlite-vec tables (see memory_core.vectors).
VECTOR_BASES = ("episodes", "beliefs")
