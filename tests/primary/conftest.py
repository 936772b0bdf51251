"""Fixtures of the Postgres primary's tests: databases on the machine's PostgreSQL (no
pgvector: real[] vectors, exact scan) and on the pgvector server the tests start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memory_core.backends import BackendURL
from tests.helpers.primary import fresh_databases

# The pgvector server fixture lives with the mirror tests' fixtures.
from tests.mirrors.conftest import pgvector_server  # noqa: F401


@pytest.fixture(scope="session")
def primary_vector_urls(pgvector_server) -> Iterator[list[BackendURL]]:  # noqa: F811
    with fresh_databases(pgvector_server.url, 2) as urls:
        yield urls
