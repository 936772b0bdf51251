"""A deleted name of the user, shipped to every mirror (``conftest.SINK_HARNESSES``): the
re-rendered beliefs, the renamed entities and the hub's aliases replace what the mirror held,
so no mirror row (nor a Neo4j literal node) names the user by it afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.mirrors.records import read_records
from memory_core.mirrors.sink import MirrorSink, order_records
from memory_core.model.deletion import delete_memory
from tests.helpers import forget_name
from tests.helpers.memory import Store, make_store
from tests.mirrors.contract import Harness, fresh_tenant


def _ship(store: Store, sink: MirrorSink, after: int) -> int:
    """Apply the outbox rows after ``after`` as the shipper does; the last id."""
    rows = store.conn.execute("SELECT id, tenant, kind, object_id FROM outbox WHERE id > ? "
                              "ORDER BY id", (after,)).fetchall()
    sink.apply(order_records(read_records(store.conn, [(t, k, o) for _, t, k, o in rows],
                                          sink.kinds)))
    return int(rows[-1][0]) if rows else after


def _values(request: pytest.FixtureRequest, harness_name: str, tenant: str) -> list[str]:
    """The literal-object nodes of a graph mirror (none elsewhere)."""
    if harness_name != "neo4j":
        return []
    from tests.helpers.neo4j_mirror import query
    server = request.getfixturevalue("bolt_server")
    return [r["k"] for r in query(server, "MATCH (v:Value {tenant: $t}) RETURN v.key AS k",
                                  t=tenant)]


def test_no_mirror_row_keeps_a_deleted_name(harness: Harness, tmp_path: Path,
                                           request: pytest.FixtureRequest) -> None:
    name = request.node.callspec.params["harness"]
    tenant = fresh_tenant("forget")
    store = make_store(tmp_path / "d", (tenant,))
    sink = harness.make_sink()
    sink.open()
    try:
        uid = forget_name.tell(store, tenant)
        shipped = _ship(store, sink, 0)
        assert "maya" in repr(harness.read_back(tenant)).lower()  # it was there
        delete_memory(store.conn, store.index, tenant, "belief", uid)
        _ship(store, sink, shipped)
        held = harness.read_back(tenant)
        assert held and "maya" not in repr(held).lower()
        assert not [v for v in _values(request, name, tenant) if "maya" in v.lower()]
    finally:
        sink.close()
        store.db.close()
