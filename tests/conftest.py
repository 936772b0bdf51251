"""Shared fixtures: real SQLite files under tmp_path, and the real services.

A fixture that cannot reach its service skips on a laptop but fails when ``CI`` is set, so a
green CI always means the service tests ran.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from memory_core import log as mnemo_log
from memory_core.db import open_ops, open_state
from memory_core.db.stores import Database
from memory_core.settings import Settings
from tests.helpers import bolt_server as bolt

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def service_unavailable(what: str) -> None:
    """Skip locally, fail in CI: a CI run must exercise every real service."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not reachable, and CI is set: .ci/run must start it")
    pytest.skip(f"{what} is not reachable")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def shared_model_path() -> Path:
    """The small real embedding model shipped in shared/ (see shared/models/README.md)."""
    env = os.environ.get("MNEMO_TEST_MODEL_PATH")
    path = Path(env) if env else SHARED / "models" / "all-MiniLM-L6-v2-onnx"
    if not (path / "model.onnx").exists():
        service_unavailable(f"the shared embedding model at {path}")
    return path


@pytest.fixture(autouse=True)
def logging_as_before() -> Iterator[None]:
    """Each test leaves the process's logging as it found it. A test that runs the CLI in
    this process configures logging there (``configure_logging``: once per process) at its
    own level, e.g. ``MNEMO_LOG_LEVEL=error``; left in place, its filtering logger would
    drop the warnings of every later test, and ``capture_logs`` (which replaces only the
    processors) would see none of them."""
    saved = structlog.get_config()
    configured = mnemo_log._configured
    root = logging.getLogger()
    had_handler, level = mnemo_log._handler in root.handlers, root.level
    # ... and starts from structlog's defaults, whatever ran before: not configured, so a CLI
    # run in this process configures logging itself (to stderr, never into --json output).
    structlog.reset_defaults()
    mnemo_log._configured = False
    yield
    structlog.reset_defaults()
    structlog.configure(**saved)
    mnemo_log._configured = configured
    if not had_handler and mnemo_log._handler in root.handlers:
        root.removeHandler(mnemo_log._handler)
    root.setLevel(level)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with a fresh data directory and nothing else from the environment."""
    return Settings.from_env({}, data_dir=tmp_path / "data")


@pytest.fixture
def state_db(settings: Settings) -> Iterator[Database]:
    db = open_state(settings)
    yield db
    db.close()


@pytest.fixture
def ops_db(settings: Settings) -> Iterator[Database]:
    db = open_ops(settings)
    yield db
    db.close()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The machine's Redis (127.0.0.1:6379)."""
    if not port_open("127.0.0.1", 6379):
        service_unavailable("Redis at 127.0.0.1:6379")
    return "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The machine's PostgreSQL (127.0.0.1:5432, database test)."""
    if not port_open("127.0.0.1", 5432):
        service_unavailable("PostgreSQL at 127.0.0.1:5432")
    return "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def bolt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bolt.BoltServer]:
    """A real Bolt server (ArcadeDB's Bolt plugin, tests/helpers/bolt_server.py) on a free
    port for the whole session. Tests keep apart by tenant, as the mirror itself does."""
    if not bolt.available():
        service_unavailable("the Bolt test server (pip install arcadedb-embedded)")
    try:
        server = bolt.start(tmp_path_factory.mktemp("bolt"))
    except RuntimeError as e:
        service_unavailable(f"the Bolt test server ({e})")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def primary_urls(postgres_url: str) -> Iterator[list]:
    """Three fresh databases on the machine's PostgreSQL for the Postgres primary (no
    pgvector there: real[] vectors, exact scan), dropped at the end. Their text sorts by an
    ICU English collation, as in many production databases, not by the server's byte order
    (a key range that byte order keeps together, "reextracted:" to "reextracted;", is empty
    there: tests/primary/test_meta.py)."""
    from memory_core.backends import parse_backend_url
    from tests.helpers.primary import fresh_databases

    with fresh_databases(parse_backend_url("postgres", "test", postgres_url), 3,
                         icu_locale="en-US") as urls:
        yield urls
