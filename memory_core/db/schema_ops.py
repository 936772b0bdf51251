"""Schema of ``memory_ops.db`` (cold): the queue, the spool and operational records.

Kept apart from the state db so background bookkeeping never contends with chat reads.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, LargeBinary, MetaData, Table, Text, text

from memory_core.db.schema_common import bookkeeping_tables

metadata = MetaData()

meta, schema_migrations = bookkeeping_tables(metadata)

# The embedded broker's durable queue (memory_core.brokers.embedded). A delivered message is
# leased; a lease that runs out (the worker died) makes it deliverable again. Acked messages
# are deleted; dead letters stay (state dead) until requeued or purged. ``attempts`` counts
# deliveries and doubles as the delivery's token: an ack only deletes the delivery it names.
# Times in the queue tables are epoch seconds (REAL): they are compared on every fetch and
# never shown; everything shown to people uses the ISO text of memory_core.clock.
queue_messages = Table(
    "queue_messages", metadata,
    Column("id", Integer, primary_key=True),
    Column("message_id", Text, nullable=False, unique=True),
    Column("queue_name", Text, nullable=False),
    Column("actor_name", Text, nullable=False),
    Column("body", LargeBinary, nullable=False),  # the encoded Dramatiq message
    Column("state", Text, nullable=False),  # ready | leased | dead
    Column("eta", Float, nullable=False),
    Column("enqueued_at", Float, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("lease_owner", Text),
    Column("lease_expires_at", Float),
    Column("dead_at", Float),
    Column("last_error", Text),  # the error's type name only, never its text
    Index("ix_queue_fetch", "queue_name", "state", "eta"),
    # Lease renewal (by owner) and expiry (by time) only look at leased rows.
    Index("ix_queue_lease", "state", "lease_expires_at"),
)

# Messages accepted while Redis was unreachable; the relay forwards them oldest first.
spool = Table(
    "spool", metadata,
    Column("id", Integer, primary_key=True),
    Column("message_id", Text, nullable=False, unique=True),
    Column("queue_name", Text, nullable=False),
    Column("body", LargeBinary, nullable=False),
    Column("spooled_at", Float, nullable=False),
)

# What after_turn sent to Redis (the record_turn messages), kept until a worker recorded the
# turn (memory_core.brokers.journal): Redis may lose a message, this host keeps its copy.
# Added by ops migration 5.
turn_journal = Table(
    "turn_journal", metadata,
    Column("id", Integer, primary_key=True),
    Column("message_id", Text, nullable=False, unique=True),
    Column("tenant", Text, nullable=False),
    Column("turn_uid", Text, nullable=False),
    Column("body", LargeBinary, nullable=False),  # the encoded Dramatiq message
    Column("sent_at", Float, nullable=False),  # epoch seconds, like the queue tables
    Column("resent_at", Float),  # the last re-send by the relay (NULL: never)
    Column("resends", Integer, nullable=False, server_default="0"),
)

audit_log = Table(
    "audit_log", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("object_kind", Text, nullable=False),
    Column("object_id", Text, nullable=False),
    Column("message_id", Text),
    Column("at", Text, nullable=False),
    Column("detail", Text),  # JSON of ids and counts, never memory text
    Index("ix_audit_tenant_at", "tenant", "at"),
    # A redelivered message reports the same mutations again: they are inserted OR IGNOREd.
    Index("ux_audit_message", "message_id", "action", "object_kind", "object_id", unique=True),
)

# One row per recall: the query's digest (never the query), the candidates and why each was
# kept or dropped. Bounded per tenant (MNEMO_RECALL_LOG_KEEP). ``applied_at``: when
# macro_sleep reinforced what the recall used (NULL: not yet).
recall_log = Table(
    "recall_log", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant", Text, nullable=False),
    Column("query_digest", Text, nullable=False),
    Column("at", Text, nullable=False),
    Column("strategy", Text, nullable=False),
    Column("explanation", Text, nullable=False),  # JSON
    Column("applied_at", Text),
    Index("ix_recall_log_tenant", "tenant", "id"),
    Index("ix_recall_log_pending", "tenant", "id", sqlite_where=text("applied_at IS NULL")),
)

# The firing ledger (memory_core.maintenance.firings): one row per schedule window.
schedule_firings = Table(
    "schedule_firings", metadata,
    Column("schedule_id", Text, primary_key=True),
    Column("window_key", Text, primary_key=True),
    Column("fired_at", Text, nullable=False),
    Column("message_id", Text),
    # claimed | enqueued | running | done | failed | missed
    Column("status", Text, nullable=False),
    Column("finished_at", Text),
    Column("duration_ms", Integer),  # work time, summed over a window's chained runs
    Column("error", Text),  # the exception's type name, never its text
    # Added by ops migration 2:
    Column("kind", Text, nullable=False, server_default="scheduled"),  # | catch_up | manual
    Column("window_start", Text),  # NULL for a manual firing
    Column("missed_count", Integer, nullable=False, server_default="0"),  # a missed row's span
    Column("started_at", Text),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("counts", Text),  # JSON of the run's counts (ids and numbers, never text)
    Index("ix_firings_schedule_start", "schedule_id", "window_start"),
    Index("ix_firings_fired_at", "fired_at"),
)

# The weekly firing-ledger report (memory_core.maintenance.ledger), one row per window.
firing_reports = Table(
    "firing_reports", metadata,
    Column("window_key", Text, primary_key=True),
    Column("since", Text, nullable=False),
    Column("until", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("body", Text, nullable=False),  # JSON: per schedule firings, misses, durations
)

leases = Table(
    "leases", metadata,
    Column("name", Text, primary_key=True),  # e.g. "scheduler-leader"
    Column("holder", Text, nullable=False),
    Column("expires_at", Float, nullable=False),
)

# One row per worker or scheduler process (memory_core.heartbeats), renewed on a timer.
heartbeats = Table(
    "heartbeats", metadata,
    Column("process_id", Text, primary_key=True),  # host:pid:random (pids are reused)
    Column("role", Text, nullable=False),  # worker | scheduler
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("last_seen_at", Text, nullable=False),
    # Added by ops migration 4:
    Column("queues", Text),  # JSON list of the queues a worker consumes
    Column("last_message_at", Text),  # when the process last finished a message
    Column("processed", Integer, nullable=False, server_default="0"),
    Column("failed", Integer, nullable=False, server_default="0"),
    Column("stopped_at", Text),  # set by a clean shutdown; NULL while running
    Column("detail", Text),  # JSON of small values (a scheduler's leadership)
)

backup_manifests = Table(
    "backup_manifests", metadata,
    Column("id", Integer, primary_key=True),
    Column("created_at", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("manifest", Text, nullable=False),  # JSON: files, sha256, row counts
)

restore_drills = Table(
    "restore_drills", metadata,
    Column("id", Integer, primary_key=True),
    Column("at", Text, nullable=False),
    Column("backup_id", Integer),
    Column("ok", Integer, nullable=False),
    Column("detail", Text, nullable=False),
)

digests = Table(
    "digests", metadata,
    Column("tenant", Text, primary_key=True),
    Column("day", Text, primary_key=True),
    Column("body", Text, nullable=False),  # JSON of counts
)

mirror_cursors = Table(
    "mirror_cursors", metadata,
    Column("sink", Text, primary_key=True),  # postgres | neo4j
    Column("last_outbox_id", Integer, nullable=False),
    Column("updated_at", Text, nullable=False),
    # The last failed shipping attempt (error type and a message without secrets or text),
    # cleared by the next success; ``mnemo mirror status`` shows it.
    Column("last_error", Text),
    Column("last_error_at", Text),
    # The last reconcile (or backup drift check): JSON counts of dead / missing / stale facts
    # per tenant with drift, and when it ran; `mnemo health` reports it.
    Column("drift", Text),
    Column("drift_checked_at", Text),
)
