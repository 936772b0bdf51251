"""The mirror sink contract, run against every sink in ``conftest.SINK_HARNESSES``.

Read ``contract.py`` for how a sink plugs in.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memory_core.mirrors.sink import MirrorSink, MirrorUnavailable, Record, order_records
from tests.mirrors.contract import (
    T1,
    T2,
    Harness,
    base_batch,
    belief,
    entity,
    episode,
    expected_state,
    fresh_tenant,
    normalized,
    turn,
    vector,
)


def _apply(sink: MirrorSink, records: Sequence[Record]) -> None:
    sink.apply(order_records(records))


def _check(harness: Harness, tenant: str, *batches: Sequence[Record]) -> None:
    got = normalized(harness.read_back(tenant))
    want = normalized(expected_state(harness, tenant, *batches))
    assert got == want


@pytest.fixture
def sink(harness: Harness):
    s = harness.make_sink()
    s.open()
    yield s
    s.close()


def test_upsert_then_read_back(harness: Harness, sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    batch = base_batch(tenant)
    _apply(sink, batch)
    _check(harness, tenant, batch)
    assert harness.read_back(tenant)  # the harness reads something: the check is not vacuous


def test_applying_the_same_batch_again_changes_nothing(harness: Harness,
                                                       sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    batch = base_batch(tenant)
    _apply(sink, batch)
    first = normalized(harness.read_back(tenant))
    _apply(sink, batch)
    _apply(sink, batch)
    assert normalized(harness.read_back(tenant)) == first
    sink.open()  # opening again (schema present) is harmless too
    _apply(sink, batch)
    assert normalized(harness.read_back(tenant)) == first


def test_invalidate_and_supersede_are_upserts_of_the_new_state(harness: Harness,
                                                              sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    batch = base_batch(tenant)
    _apply(sink, batch)
    later = [
        belief(tenant, "b1", "user", "lives_in", "Lisbon", status="superseded", valid_to=T1),
        belief(tenant, "b5", "user", "lives_in", "Porto"),
        belief(tenant, "b3", "user", "knows", "Ana", obj_entity="ana", status="invalidated",
               retired_at=T2, turn_uid="u2"),
    ]
    _apply(sink, later)
    _check(harness, tenant, batch, later)


def test_deletes_remove_only_their_object(harness: Harness, sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    batch = base_batch(tenant)
    _apply(sink, batch)
    gone = [Record(tenant, "belief", "b2", None), Record(tenant, "episode", "e2", None),
            Record(tenant, "turn", "u2", None), Record(tenant, "entity", "ana", None),
            Record(tenant, "belief", "b3", None), Record(tenant, "belief", "never", None)]
    _apply(sink, gone)
    _check(harness, tenant, batch, gone)
    _apply(sink, gone)  # a tombstone applied twice is still one delete
    _check(harness, tenant, batch, gone)


def test_a_merge_deletes_the_loser_and_rewires_its_beliefs(harness: Harness,
                                                          sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    batch = [*base_batch(tenant), entity(tenant, "acme_inc", "Acme Inc"),
             belief(tenant, "b6", "acme_inc", "located_in", "Porto")]
    _apply(sink, batch)
    merge = [Record(tenant, "entity", "acme_inc", None),
             entity(tenant, "acme", "Acme", ["ACME corp", "Acme Inc"]),
             Record(tenant, "belief", "b6", None),
             belief(tenant, "b7", "acme", "located_in", "Porto")]
    _apply(sink, merge)
    _check(harness, tenant, batch, merge)


def test_a_tenant_clear_empties_that_tenant_only(harness: Harness, sink: MirrorSink) -> None:
    mine, other = fresh_tenant("a"), fresh_tenant("b")
    batch = [*base_batch(mine), *base_batch(other)]  # the same keys in two tenants
    _apply(sink, batch)
    clear = [Record(mine, "tenant", mine, None)]
    _apply(sink, clear)
    assert harness.read_back(mine) == {}
    _check(harness, other, batch)
    # A clear followed by new writes in the same batch: the writes survive the clear.
    again = [Record(mine, "tenant", mine, None), turn(mine, "u9", 9),
             entity(mine, "user", "user")]
    _apply(sink, again)
    _check(harness, mine, batch, clear, again)


def test_tenants_never_see_each_others_rows(harness: Harness, sink: MirrorSink) -> None:
    a, b = fresh_tenant("a"), fresh_tenant("b")
    _apply(sink, base_batch(a))
    _apply(sink, [entity(b, "user", "user"), belief(b, "b1", "user", "lives_in", "Oslo")])
    _apply(sink, [Record(b, "belief", "b2", None), Record(b, "entity", "acme", None)])
    _check(harness, a, base_batch(a))
    got_b = normalized(harness.read_back(b))
    assert got_b == normalized(expected_state(
        harness, b, [entity(b, "user", "user"), belief(b, "b1", "user", "lives_in", "Oslo")]))


def test_the_last_record_of_a_key_in_a_batch_wins(harness: Harness, sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    batch = [entity(tenant, "user", "user"),
             episode(tenant, "e1", [], vector(1), tier="working"),
             episode(tenant, "e1", [], vector(2), tier="recent"),
             belief(tenant, "b1", "user", "lives_in", "Lisbon"),
             Record(tenant, "belief", "b1", None)]
    _apply(sink, batch)
    _check(harness, tenant, batch)


def test_an_empty_batch_is_a_no_op(harness: Harness, sink: MirrorSink) -> None:
    tenant = fresh_tenant()
    _apply(sink, base_batch(tenant))
    before = normalized(harness.read_back(tenant))
    sink.apply([])
    assert normalized(harness.read_back(tenant)) == before


def test_a_down_mirror_raises_unavailable_and_applies_nothing(harness: Harness) -> None:
    tenant = fresh_tenant()
    down = harness.make_down_sink()
    with pytest.raises(MirrorUnavailable) as caught:
        down.open()
        down.apply(order_records(base_batch(tenant)))
    assert "Lisbon" not in str(caught.value)  # no memory text in the error
    down.close()
    assert harness.read_back(tenant) == {}
