"""RecallResult: facts come first in handle order and in the JSON form."""

from __future__ import annotations

import json

import pytest

from memory_core.recall import RecallFact, RecallItem, RecallResult


def _fact(handle: int, obj: str) -> RecallFact:
    return RecallFact(handle=handle, fact_id=f"belief:b{handle}", subject="Maya",
                      predicate="lives_in", object=obj, text=f"Maya lives in {obj}",
                      valid_from="2024-01-01T00:00:00.000000Z", valid_to=None,
                      confidence=0.9, source="user", turn_uids=(f"t{handle}",), score=1.5,
                      components={"entity": 1.0}, superseded=("Boston",))


def test_facts_are_numbered_first_and_serialised() -> None:
    item = RecallItem(handle=2, item_id="episode:e1", kind="episode", text="moved",
                      score=0.5, components={}, turn_uids=("t1", "t9"))
    result = RecallResult(tenant="t", items=(item,), query_digest="d", strategy="default",
                          facts=(_fact(1, "Denver"),))
    assert result.by_handle(1).text == "Maya lives in Denver"
    assert result.by_handle(2) is item
    with pytest.raises(IndexError, match=r"\[3\]"):
        result.by_handle(3)
    assert result.turn_uids() == ["t1", "t9"]
    assert len(result) == 1  # len and iteration cover the evidence
    data = json.loads(json.dumps(result.to_dict()))
    assert data["facts"][0]["object"] == "Denver"
    assert data["facts"][0]["label"] == "[1]"
    assert data["facts"][0]["superseded"] == ["Boston"]
    assert all(i["kind"] != "belief" for i in data["items"])
