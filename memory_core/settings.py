"""One frozen Settings object, built from ``MNEMO_*`` variables at each entry point.

Nothing else in mnemo reads the environment. Values are parsed strictly; a bad value is
refused with a message that names the variable and the valid forms and never repeats the
value (it may be a secret). Every variable is documented in ``docs/configuration.md``; a test
fails when one is missing there.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memory_core.backends import BackendURL, parse_backend_url, parse_name
from memory_core.errors import ConfigurationError

PREFIX = "MNEMO_"
# Variables under this prefix belong to the test suite and benchmarks, not to mnemo itself.
IGNORED_PREFIXES = ("MNEMO_TEST_",)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def _not(raw: str) -> str:
    """The bad value, for a message naming it (only for variables that hold no secret:
    booleans, numbers, choices)."""
    return f", not {raw[:40]!r}"


def parse_bool(var: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(f"{var} must be a boolean: one of true/false, 1/0, yes/no, "
                             f"on/off{_not(raw)}")


def _int_parser(lo: int, hi: int) -> Callable[[str, str], int]:
    def parse(var: str, raw: str) -> int:
        try:
            value = int(raw.strip(), 10)
        except ValueError:
            raise ConfigurationError(
                f"{var} must be a whole number from {lo} to {hi}{_not(raw)}"
            ) from None
        if not lo <= value <= hi:
            raise ConfigurationError(f"{var} must be a whole number from {lo} to {hi}{_not(raw)}")
        return value

    return parse


def _fraction_parser(lo: float, hi: float) -> Callable[[str, str], float]:
    def parse(var: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigurationError(
                f"{var} must be a decimal number from {lo} to {hi}{_not(raw)}") from None
        if not lo <= value <= hi:  # also refuses nan
            raise ConfigurationError(
                f"{var} must be a decimal number from {lo} to {hi}{_not(raw)}")
        return value

    return parse


def _choice_parser(*choices: str) -> Callable[[str, str], str]:
    def parse(var: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigurationError(f"{var} must be one of: {', '.join(choices)}{_not(raw)}")
        return value

    return parse


def parse_tenant(var: str, raw: str) -> str:
    value = raw.strip()
    if not _TENANT_RE.match(value):
        raise ConfigurationError(
            f"{var} must be a tenant id: 1-64 characters of a-z, 0-9, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return value


def _text(var: str, raw: str) -> str:
    value = raw.strip()
    if not value or any(ord(c) < 32 for c in value):
        raise ConfigurationError(f"{var} must be non-empty text without control characters")
    return value


def _path(var: str, raw: str) -> Path:
    return Path(_text(var, raw)).expanduser()


def _backend_parser(kind: str) -> Callable[[str, str], str]:
    """A backend URL by the strict grammar of ``memory_core.backends``, kept in canonical
    form (the value as entered is never stored, shown or logged)."""
    def parse(var: str, raw: str) -> str:
        return parse_backend_url(kind, var, raw).canonical

    return parse


def _broker_url(var: str, raw: str) -> str:
    """``sqlite:///PATH`` (the embedded queue in another file) or a Redis URL."""
    value = raw.strip()
    if value.lower().startswith("sqlite:"):
        if any(c.isspace() or ord(c) < 32 for c in value):
            raise ConfigurationError(f"{var} must be sqlite:///PATH without spaces or control "
                                     "characters")
        parts = urlsplit(value)
        if parts.netloc or parts.query or parts.fragment:
            raise ConfigurationError(f"{var} must be sqlite:///PATH (no host, query or "
                                     "fragment)")
        return "sqlite:" + value[len("sqlite:"):]  # the scheme in lower case
    if not value.lower().startswith(("redis://", "rediss://")):
        raise ConfigurationError(f"{var} must start with one of: sqlite://, redis://, rediss:// "
                                 "(sqlite:///PATH or redis://HOST:6379/0); the value is not "
                                 "shown")
    return parse_backend_url("redis", var, value).canonical


def environment_names() -> frozenset[str]:
    """The names (never the values) of this process's non-empty environment variables, read
    now: for checks of what a client library will read when it connects (libpq's ``PG*``)."""
    return frozenset(k for k, v in os.environ.items() if v)


@dataclass(frozen=True)
class _Var:
    env: str
    field: str
    parse: Callable[[str, str], Any]
    doc: str
    secret: bool = False


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mnemo"


@dataclass(frozen=True)
class Settings:
    """Everything mnemo can be configured with. Build it with ``Settings.from_env()``."""

    data_dir: Path = field(default_factory=_default_data_dir)
    default_tenant: str = "default"
    embedder: str = "hash"
    embed_model: str | None = None  # None: BAAI/bge-small-en-v1.5
    embed_model_path: Path | None = None
    embed_allow_download: bool = False
    embed_cache_dir: Path | None = None
    embed_batch_size: int | None = None
    embed_batch_window_ms: int = 5
    embed_batch_max_texts: int = 32
    embed_threads: int | None = None
    embed_quantize: str = "none"
    hash_dim: int = 384
    broker_url: str | None = None  # canonical (memory_core.backends), or sqlite:///PATH
    redis_password: str | None = field(default=None, repr=False)
    postgres_url: str | None = None  # canonical
    postgres_password: str | None = field(default=None, repr=False)
    state_backend: str = "sqlite"  # sqlite | postgres (the Postgres primary)
    neo4j_url: str | None = None  # canonical
    neo4j_user: str = "neo4j"
    neo4j_password: str | None = field(default=None, repr=False)
    neo4j_database: str = "neo4j"
    log_format: str = "auto"
    log_level: str = "info"
    busy_timeout_ms: int = 5000
    sqlite_mmap_mb: int = 256
    sqlite_bm25: bool = True
    max_turn_chars: int = 32_768
    max_query_chars: int = 4_096
    recall_max_items: int = 10
    recall_fact_budget: int = 8
    recall_helper_threads: int = 0
    recall_resident_rows: int = 200_000
    recall_max_tokens: int = 1_500
    recall_log_keep: int = 500
    backup_dir: Path | None = None  # None: ``backups`` in data_dir
    backup_keep: int = 8
    queue_lease_seconds: int = 60
    redis_timeout_ms: int = 20
    worker_processes: int = 2
    worker_threads: int = 4
    # Memory maintenance (memory_core/maintenance; docs/memory-model.md).
    session_idle_s: int = 1_800
    importance_half_life_s: int = 30 * 86_400
    reinforce_boost: float = 0.1
    tier_recent_s: int = 7 * 86_400
    tier_archive_s: int = 90 * 86_400
    archive_importance: float = 0.2
    session_purge_below: float = 0.35
    commitment_grace_s: int = 86_400
    commitment_ttl_s: int = 30 * 86_400
    pending_review_ttl_s: int = 7 * 86_400
    scheduler_lease_seconds: int = 30
    schedule_history_days: int = 90
    recon_partitions: int = 16
    recon_batch: int = 500
    # Health (memory_core/health; docs/cli.md `mnemo health`).
    redis_require_persistence: bool = False
    heartbeat_interval_s: int = 5
    storage_check_s: float = 60.0
    storage_retry_s: float = 5.0
    heartbeat_keep_s: int = 3_600
    health_stale_s: int = 30
    health_queue_depth: int = 10_000
    health_queue_age_s: int = 600
    health_dead_letters: int = 0
    health_spool: int = 1_000
    health_drill_age_s: int = 8 * 86_400
    health_mirror_lag: int = 10_000
    # Completeness (memory_core/write/completeness.py, brokers/journal.py; docs/queue.md).
    completeness_grace_s: int = 600
    completeness_max_turns: int = 20_000
    turn_journal: bool = True
    turn_journal_resend_s: int = 60

    def __post_init__(self) -> None:
        for name in ("data_dir", "embed_model_path", "embed_cache_dir", "backup_dir"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, Path(value).expanduser())
        # URLs given as keyword overrides go through the same strict grammar as variables.
        for name, env, parse in (("broker_url", "MNEMO_BROKER_URL", _broker_url),
                                 ("postgres_url", "MNEMO_POSTGRES_URL",
                                  _backend_parser("postgres")),
                                 ("neo4j_url", "MNEMO_NEO4J_URL", _backend_parser("neo4j"))):
            value = getattr(self, name)
            if isinstance(value, str) and value.strip():
                object.__setattr__(self, name, parse(env, value))
            elif value is not None and not isinstance(value, str):
                raise ConfigurationError(f"{env} must be text")

    @property
    def state_db_path(self) -> Path:
        return self.data_dir / "memory_state.db"

    @property
    def ops_db_path(self) -> Path:
        return self.data_dir / "memory_ops.db"

    @property
    def backups_path(self) -> Path:
        return self.backup_dir if self.backup_dir is not None else self.data_dir / "backups"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Parse ``MNEMO_*`` variables (``os.environ`` by default); keyword overrides win.

        Raises ConfigurationError naming the variable and its valid forms for a bad value,
        an unknown ``MNEMO_*`` name (with the nearest known one), or a contradiction.
        """
        env = os.environ if environ is None else environ
        known = {v.env: v for v in VARIABLES}
        values: dict[str, Any] = {}
        for name, raw in env.items():
            if not name.startswith(PREFIX) or name.startswith(IGNORED_PREFIXES):
                continue
            var = known.get(name)
            if var is None:
                hint = difflib.get_close_matches(name, known, n=1)
                did_you_mean = f" (did you mean {hint[0]}?)" if hint else ""
                raise ConfigurationError(
                    f"unknown setting {name}{did_you_mean}: the valid variables are listed "
                    "in docs/configuration.md"
                )
            if raw.strip() == "":
                continue  # an empty variable means "not set"
            values[var.field] = var.parse(name, raw)
        values.update(overrides)
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse contradictory combinations, listing the valid forms."""
        if self.embedder == "hash" and self.embed_model_path is not None:
            raise ConfigurationError(
                "MNEMO_EMBED_MODEL_PATH is set but MNEMO_EMBEDDER is hash: set "
                "MNEMO_EMBEDDER=fastembed to use the model, or unset MNEMO_EMBED_MODEL_PATH"
            )
        if self.embed_quantize != "none" and (self.embedder != "fastembed"
                                              or self.embed_model_path is None):
            raise ConfigurationError(
                f"MNEMO_EMBED_QUANTIZE={self.embed_quantize} quantizes a local model: set "
                "MNEMO_EMBEDDER=fastembed and MNEMO_EMBED_MODEL_PATH to the folder of the "
                "fp32 ONNX export, or unset MNEMO_EMBED_QUANTIZE")
        if self.embed_model_path is not None and self.embed_model is None:
            raise ConfigurationError(
                "MNEMO_EMBED_MODEL_PATH is set without MNEMO_EMBED_MODEL: name the model the "
                "folder holds (e.g. sentence-transformers/all-MiniLM-L6-v2), because its "
                "pooling depends on it"
            )
        if self.neo4j_password and not self.neo4j_url:
            raise ConfigurationError(
                "MNEMO_NEO4J_PASSWORD is set without MNEMO_NEO4J_URL: set the URL "
                "(bolt://host:7687) or unset the password"
            )
        for password, url, pvar, uvar in (
                (self.postgres_password, self.postgres_url, "MNEMO_POSTGRES_PASSWORD",
                 "MNEMO_POSTGRES_URL"),
                (self.redis_password, self.redis_backend, "MNEMO_REDIS_PASSWORD",
                 "MNEMO_BROKER_URL (redis://...)")):
            if password and not url:
                raise ConfigurationError(f"{pvar} is set without {uvar}: set the URL or unset "
                                         "the password")
        if self.state_backend == "postgres" and not self.postgres_url:
            raise ConfigurationError(
                "MNEMO_STATE_BACKEND=postgres needs MNEMO_POSTGRES_URL "
                "(postgresql://USER@HOST[:PORT]/DATABASE): set it, or set "
                "MNEMO_STATE_BACKEND=sqlite")
        if self.recall_log_keep < 1:
            raise ConfigurationError("MNEMO_RECALL_LOG_KEEP must be at least 1")
        if self.tier_archive_s <= self.tier_recent_s:
            raise ConfigurationError(
                "MNEMO_TIER_ARCHIVE_S must be longer than MNEMO_TIER_RECENT_S: an episode is "
                "recent first, and only an older one can be archived")

    @property
    def broker_kind(self) -> str:
        """``embedded`` (SQLite queue in memory_ops.db) or ``redis``."""
        if not self.broker_url or self.broker_url.startswith("sqlite:"):
            return "embedded"
        return "redis"

    @cached_property
    def postgres_backend(self) -> BackendURL | None:
        """The Postgres mirror's parsed URL (clients are built from its parts)."""
        if not self.postgres_url:
            return None
        return parse_backend_url("postgres", "MNEMO_POSTGRES_URL", self.postgres_url)

    @cached_property
    def redis_backend(self) -> BackendURL | None:
        """The Redis broker's parsed URL; None for the embedded queue."""
        if self.broker_kind != "redis":
            return None
        return parse_backend_url("redis", "MNEMO_BROKER_URL", str(self.broker_url))

    @cached_property
    def neo4j_backend(self) -> BackendURL | None:
        """The Neo4j mirror's parsed URL (the user and database are their own settings)."""
        if not self.neo4j_url:
            return None
        return parse_backend_url("neo4j", "MNEMO_NEO4J_URL", self.neo4j_url)

    def redacted(self) -> dict[str, Any]:
        """A JSON-able view for status output: URLs in canonical form (they cannot hold a
        password), secrets masked."""
        out: dict[str, Any] = {}
        for var in VARIABLES:
            value = getattr(self, var.field)
            if var.secret and value:
                value = "***"
            elif isinstance(value, Path):
                value = str(value)
            out[var.env] = value
        return out


_bool = parse_bool
VARIABLES: tuple[_Var, ...] = (
    _Var("MNEMO_DATA_DIR", "data_dir", _path,
         "Folder of memory_state.db and memory_ops.db."),
    _Var("MNEMO_TENANT", "default_tenant", parse_tenant,
         "Tenant used when a caller names none."),
    _Var("MNEMO_EMBEDDER", "embedder", _choice_parser("hash", "fastembed"),
         "Embedder for dense recall: hash (keyword-grade, no dependency) or fastembed."),
    _Var("MNEMO_EMBED_MODEL", "embed_model", _text,
         "fastembed model name (full registry name); default BAAI/bge-small-en-v1.5."),
    _Var("MNEMO_EMBED_MODEL_PATH", "embed_model_path", _path,
         "Local folder holding the fastembed model (ONNX export); used with no network."),
    _Var("MNEMO_EMBED_ALLOW_DOWNLOAD", "embed_allow_download", _bool,
         "Let fastembed download the configured model when it is not cached."),
    _Var("MNEMO_EMBED_CACHE_DIR", "embed_cache_dir", _path,
         "Where fastembed keeps downloaded models."),
    _Var("MNEMO_EMBED_BATCH_SIZE", "embed_batch_size", _int_parser(1, 4096),
         "Texts per embedding batch (default: the embedder's own)."),
    _Var("MNEMO_EMBED_BATCH_WINDOW_MS", "embed_batch_window_ms", _int_parser(0, 1000),
         "Worker: how long the first embedding request waits for other threads' requests to "
         "share its batch (0: every call embeds on its own, and nothing is embedded ahead)."),
    _Var("MNEMO_EMBED_BATCH_MAX_TEXTS", "embed_batch_max_texts", _int_parser(1, 4096),
         "Worker: a shared embedding batch runs at once when this many texts are waiting; "
         "with a semantic model, also how many turn messages a worker process leases ahead "
         "and starts embedding before a thread takes them."),
    _Var("MNEMO_EMBED_THREADS", "embed_threads", _int_parser(1, 256),
         "fastembed: CPU threads per model run (default: all cores); 1 suits a pool of "
         "several worker processes."),
    _Var("MNEMO_EMBED_QUANTIZE", "embed_quantize", _choice_parser("none", "int8"),
         "fastembed: int8 embeds with an int8 copy of the local model (made once from "
         "MNEMO_EMBED_MODEL_PATH into MNEMO_EMBED_CACHE_DIR, else <data dir>/models): "
         "0.4-0.5x the CPU per text, different vectors (a separate embedder identity: "
         "`mnemo memory reindex` to switch a store)."),
    _Var("MNEMO_HASH_DIM", "hash_dim", _int_parser(16, 4096),
         "Dimension of the hash embedder's vectors."),
    _Var("MNEMO_BROKER_URL", "broker_url", _broker_url,
         "Task queue: unset or sqlite:///PATH for the embedded queue, "
         "redis[s]://[USER@]HOST[:PORT][/DB] for Redis (no password: MNEMO_REDIS_PASSWORD).",
         secret=False),
    _Var("MNEMO_REDIS_PASSWORD", "redis_password", _text,
         "Password of the Redis broker (never inside MNEMO_BROKER_URL).", secret=True),
    _Var("MNEMO_POSTGRES_URL", "postgres_url", _backend_parser("postgres"),
         "Postgres mirror, postgresql://USER@HOST[:PORT]/DATABASE (off when unset; no "
         "password: MNEMO_POSTGRES_PASSWORD)."),
    _Var("MNEMO_POSTGRES_PASSWORD", "postgres_password", _text,
         "Password of the Postgres mirror's user (never inside MNEMO_POSTGRES_URL).",
         secret=True),
    _Var("MNEMO_STATE_BACKEND", "state_backend", _choice_parser("sqlite", "postgres"),
         "Where the memory itself lives: sqlite (memory_state.db in MNEMO_DATA_DIR) or "
         "postgres (the Postgres primary at MNEMO_POSTGRES_URL, schema mnemo_primary; switch "
         "an existing memory with `mnemo mirror promote`)."),
    _Var("MNEMO_NEO4J_URL", "neo4j_url", _backend_parser("neo4j"),
         "Neo4j dual-write of belief edges, bolt[+s|+ssc]://HOST[:PORT] or "
         "neo4j[+s|+ssc]://HOST[:PORT] (off when unset; no user, password or path: "
         "MNEMO_NEO4J_USER, MNEMO_NEO4J_PASSWORD, MNEMO_NEO4J_DATABASE)."),
    _Var("MNEMO_NEO4J_USER", "neo4j_user", parse_name,
         "Neo4j user name (letters, digits, '.', '_', '-')."),
    _Var("MNEMO_NEO4J_PASSWORD", "neo4j_password", _text, "Neo4j password.", secret=True),
    _Var("MNEMO_NEO4J_DATABASE", "neo4j_database", parse_name,
         "Neo4j database name (letters, digits, '.', '_', '-')."),
    _Var("MNEMO_LOG_FORMAT", "log_format", _choice_parser("auto", "json", "console"),
         "Log format of every line, Dramatiq's and other libraries' included: auto (JSON "
         "unless on a terminal), json or console."),
    _Var("MNEMO_LOG_LEVEL", "log_level", _choice_parser("debug", "info", "warning", "error"),
         "Lowest level of mnemo's log lines; other libraries' lines are written from "
         "warning up, or from this level when it is higher."),
    _Var("MNEMO_BUSY_TIMEOUT_MS", "busy_timeout_ms", _int_parser(0, 600_000),
         "How long a SQLite connection waits for a lock before failing."),
    _Var("MNEMO_SQLITE_MMAP_MB", "sqlite_mmap_mb", _int_parser(0, 1_048_576),
         "Megabytes of each SQLite file read through a memory map (faster recall on large "
         "memories); 0 turns it off."),
    _Var("MNEMO_SQLITE_BM25", "sqlite_bm25", _bool,
         "Rank keyword search in C with mnemo's SQLite extension when the install built it "
         "(a C compiler and sqlite3ext.h); false ranks in Python. The same results either "
         "way; C is faster."),
    _Var("MNEMO_MAX_TURN_CHARS", "max_turn_chars", _int_parser(1, 1_000_000),
         "Longest turn text accepted; longer turns are refused with an error."),
    _Var("MNEMO_MAX_QUERY_CHARS", "max_query_chars", _int_parser(1, 1_000_000),
         "Longest recall query accepted; longer queries are refused with an error."),
    _Var("MNEMO_RECALL_MAX_ITEMS", "recall_max_items", _int_parser(1, 1000),
         "Default number of items a recall returns."),
    _Var("MNEMO_RECALL_FACT_BUDGET", "recall_fact_budget", _int_parser(0, 100),
         "Default number of facts (currently valid beliefs) a recall returns before the "
         "evidence items; 0 turns the facts channel off."),
    _Var("MNEMO_RECALL_HELPER_THREADS", "recall_helper_threads", _int_parser(0, 64),
         "Threads in the chat process that embed the query and run dense search beside "
         "the caller's keyword search (semantic embedders; worth it with spare cores)."),
    _Var("MNEMO_RECALL_RESIDENT_ROWS", "recall_resident_rows", _int_parser(0, 100_000_000),
         "Memories (episodes and beliefs) whose keyword postings, vectors and rows the chat "
         "process holds for recall, the tenants it recalled for last (a tenant over 50,000 "
         "is read from the store; ~2 KB each with a 384-dimension embedder); 0: always the "
         "store."),
    _Var("MNEMO_RECALL_MAX_TOKENS", "recall_max_tokens", _int_parser(16, 1_000_000),
         "Default token budget of a recall result."),
    _Var("MNEMO_RECALL_LOG_KEEP", "recall_log_keep", _int_parser(1, 100_000),
         "Recall explanations kept per tenant."),
    _Var("MNEMO_BACKUP_DIR", "backup_dir", _path,
         "Folder of the backups (default: backups in MNEMO_DATA_DIR); best on another disk."),
    _Var("MNEMO_BACKUP_KEEP", "backup_keep", _int_parser(1, 10_000),
         "Complete backups kept; each new backup deletes the older ones beyond this number."),
    _Var("MNEMO_QUEUE_LEASE_SECONDS", "queue_lease_seconds", _int_parser(5, 86_400),
         "Embedded queue: how long a delivered message is leased before redelivery."),
    _Var("MNEMO_REDIS_TIMEOUT_MS", "redis_timeout_ms", _int_parser(1, 60_000),
         "How long after_turn waits for Redis before spooling the message locally."),
    _Var("MNEMO_WORKER_PROCESSES", "worker_processes", _int_parser(1, 256),
         "Worker processes started by `mnemo worker` and `mnemo up`."),
    _Var("MNEMO_WORKER_THREADS", "worker_threads", _int_parser(1, 256),
         "Threads per worker process."),
    _Var("MNEMO_SESSION_IDLE_S", "session_idle_s", _int_parser(60, 30 * 86_400),
         "Seconds without a turn after which a chat session has ended (its working episodes "
         "move to recent; session_purge tidies them)."),
    _Var("MNEMO_IMPORTANCE_HALF_LIFE_S", "importance_half_life_s",
         _int_parser(3_600, 3_650 * 86_400),
         "Seconds in which an episode's importance halves unless recall reinforces it."),
    _Var("MNEMO_REINFORCE_BOOST", "reinforce_boost", _fraction_parser(0.0, 1.0),
         "Share of the way to 1 an episode's importance rises each time a recall used it."),
    _Var("MNEMO_TIER_RECENT_S", "tier_recent_s", _int_parser(3_600, 3_650 * 86_400),
         "Age (since it happened) at which a recent episode moves to long_term."),
    _Var("MNEMO_TIER_ARCHIVE_S", "tier_archive_s", _int_parser(3_600, 36_500 * 86_400),
         "Age at which a long_term episode whose importance is below "
         "MNEMO_ARCHIVE_IMPORTANCE is archived (kept, not recalled by default)."),
    _Var("MNEMO_ARCHIVE_IMPORTANCE", "archive_importance", _fraction_parser(0.0, 1.0),
         "Importance below which an old episode is archived; above it, it stays long_term."),
    _Var("MNEMO_SESSION_PURGE_BELOW", "session_purge_below", _fraction_parser(0.0, 1.0),
         "session_purge deletes an ended session's never-recalled episodes whose importance "
         "signals (length, beliefs, an explicit ask) score below this; 0 turns it off."),
    _Var("MNEMO_COMMITMENT_GRACE_S", "commitment_grace_s", _int_parser(0, 365 * 86_400),
         "How long after its date a commitment (plans_to, committed_to, reminder) stays "
         "active before commitment_gc expires it."),
    _Var("MNEMO_COMMITMENT_TTL_S", "commitment_ttl_s", _int_parser(3_600, 3_650 * 86_400),
         "Time to live of a commitment stated without a date, from when it was said."),
    _Var("MNEMO_PENDING_REVIEW_TTL_S", "pending_review_ttl_s",
         _int_parser(3_600, 3_650 * 86_400),
         "How long a pending-review belief waits for a review before it expires."),
    _Var("MNEMO_SCHEDULER_LEASE_SECONDS", "scheduler_lease_seconds", _int_parser(1, 3600),
         "Leader lease of `mnemo scheduler`: renewed every third of it; a standby takes over "
         "within about this long after the leader dies."),
    _Var("MNEMO_SCHEDULE_HISTORY_DAYS", "schedule_history_days", _int_parser(8, 3650),
         "Days the firing ledger and the window claims are kept."),
    _Var("MNEMO_RECON_PARTITIONS", "recon_partitions", _int_parser(1, 4096),
         "Partitions (by subject hash) of one global_reconsolidation run, each a chained task."),
    _Var("MNEMO_RECON_BATCH", "recon_batch", _int_parser(10, 100_000),
         "Rows of a partition handled per reconsolidation transaction (shorter "
         "transactions block the writers less)."),
    _Var("MNEMO_REDIS_REQUIRE_PERSISTENCE", "redis_require_persistence", _bool,
         "Refuse to start workers (and make `mnemo health` unhealthy) when the Redis broker "
         "runs without `appendonly yes`; off: warn only."),
    _Var("MNEMO_HEARTBEAT_INTERVAL_S", "heartbeat_interval_s", _int_parser(1, 300),
         "Seconds between the heartbeats each worker and scheduler process writes to "
         "memory_ops.db."),
    _Var("MNEMO_STORAGE_CHECK_S", "storage_check_s", _fraction_parser(0.1, 86_400.0),
         "Seconds between a worker's storage probes while its messages succeed (writable, "
         "free space, PRAGMA quick_check); a probe that took longer runs at most every 100 "
         "times what it took (at most 1% of one thread's time)."),
    _Var("MNEMO_STORAGE_RETRY_S", "storage_retry_s", _fraction_parser(0.05, 3_600.0),
         "Seconds between a paused worker's storage probes (it resumes on the first that "
         "finds every database writable and undamaged)."),
    _Var("MNEMO_HEARTBEAT_KEEP_S", "heartbeat_keep_s", _int_parser(60, 30 * 86_400),
         "Heartbeats not renewed for this long (stopped or dead processes) are deleted."),
    _Var("MNEMO_HEALTH_STALE_S", "health_stale_s", _int_parser(2, 86_400),
         "A heartbeat older than this is stale: its process is taken for dead by "
         "`mnemo health` and the liveness probes."),
    _Var("MNEMO_HEALTH_QUEUE_DEPTH", "health_queue_depth", _int_parser(1, 1_000_000_000),
         "`mnemo health` is degraded when more messages than this wait on one queue."),
    _Var("MNEMO_HEALTH_QUEUE_AGE_S", "health_queue_age_s", _int_parser(1, 365 * 86_400),
         "`mnemo health` is degraded when a queue's oldest ready message is older than this."),
    _Var("MNEMO_HEALTH_DEAD_LETTERS", "health_dead_letters", _int_parser(0, 1_000_000_000),
         "`mnemo health` is degraded when there are more dead letters than this (default 0: "
         "any)."),
    _Var("MNEMO_HEALTH_SPOOL", "health_spool", _int_parser(0, 1_000_000_000),
         "`mnemo health` is degraded when more messages than this wait in the local spool "
         "for Redis."),
    _Var("MNEMO_HEALTH_DRILL_AGE_S", "health_drill_age_s", _int_parser(3_600, 365 * 86_400),
         "`mnemo health` is degraded when the last restore drill is older than this."),
    _Var("MNEMO_HEALTH_MIRROR_LAG", "health_mirror_lag", _int_parser(0, 1_000_000_000),
         "`mnemo health` is degraded when a mirror is more outbox rows behind than this."),
    _Var("MNEMO_COMPLETENESS_GRACE_S", "completeness_grace_s", _int_parser(0, 7 * 86_400),
         "The completeness check (macro_sleep, commitment_gc, `mnemo queue verify`) skips "
         "turns recorded more recently than this: their follow-ups may still be in flight."),
    _Var("MNEMO_COMPLETENESS_MAX_TURNS", "completeness_max_turns",
         _int_parser(1, 1_000_000_000),
         "Most recorded turns (newest first) one completeness check reads."),
    _Var("MNEMO_TURN_JOURNAL", "turn_journal", _bool,
         "Redis broker: after_turn keeps what it sent in a journal in memory_ops.db until a "
         "worker has recorded the turn, and the workers' relay re-sends what Redis lost; "
         "off: a turn lost by Redis stays lost."),
    _Var("MNEMO_TURN_JOURNAL_RESEND_S", "turn_journal_resend_s", _int_parser(1, 7 * 86_400),
         "A journal entry whose turn is still not recorded this long after it was sent (or "
         "last re-sent) is sent again."),
)
