"""The sink harnesses the contract suite (``test_contract.py``) runs against.

Add a sink: write a ``harness_<name>`` fixture (see ``contract.py``) and add ``<name>`` here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mirrors.contract import Harness
from tests.mirrors.reference_sink import ReferenceSink

SINK_HARNESSES = ["reference"]


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

    def read_back(tenant: str) -> dict:
        return ReferenceSink(store).read_back(tenant)

    yield Harness(make_sink=lambda: ReferenceSink(store), make_down_sink=down,
                  read_back=read_back)
