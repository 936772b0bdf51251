"""The reference sink: a dict, the contract's executable specification.

It is what the contract suite checks first (so a failure there is in the suite, not in a
real sink) and what shipping tests use when the sink's engine is not the point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_core.mirrors.sink import KINDS, MirrorUnavailable, Record


class ReferenceSink:
    name = "reference"
    kinds = frozenset(KINDS)

    def __init__(self, store: dict[tuple[str, str, str], dict[str, Any]] | None = None) -> None:
        self.store = {} if store is None else store
        self.down = False
        self.applied_batches = 0

    def open(self) -> None:
        if self.down:
            raise MirrorUnavailable("mirror reference is down")

    def apply(self, records: Sequence[Record]) -> None:
        if self.down:
            raise MirrorUnavailable("mirror reference is down")
        staged = dict(self.store)  # all or nothing
        for r in records:
            if r.kind == "tenant":
                for key in [k for k in staged if k[0] == r.tenant]:
                    del staged[key]
            elif r.row is None:
                staged.pop((r.tenant, r.kind, r.key), None)
            else:
                staged[(r.tenant, r.kind, r.key)] = dict(r.row)
        self.store.clear()
        self.store.update(staged)
        self.applied_batches += 1

    def close(self) -> None:
        pass

    def read_back(self, tenant: str) -> dict[tuple[str, str], dict[str, Any]]:
        return {(k, key): dict(row) for (t, k, key), row in self.store.items() if t == tenant}
