"""Reading a mirror back for reconcile (``MirrorReader``): the Neo4j sink reads its own
edges; the Postgres mirror is read here, beside its sink, with the sink's pool.

``reader_for(sink)`` is the one place reconcile, `mnemo mirror reconcile` and the backup
schedule's drift check get a reader from a configured sink.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memory_core.clock import to_db
from memory_core.mirrors.reconcile import FACT_FIELDS, MirrorReader
from memory_core.mirrors.sink import MirrorSink, Record

PAGE = 2_000


class PostgresReader:
    """The Postgres mirror as a ``MirrorReader``: it keeps every belief with its bi-temporal
    fields (``live_only`` is False), so a missed invalidate shows as a row still live there."""

    live_only = False

    def __init__(self, sink: Any) -> None:  # memory_core.mirrors.postgres.PostgresSink
        self.sink = sink
        self.name = sink.name

    def open(self) -> None:
        self.sink.open()

    def apply(self, records: Sequence[Record]) -> None:
        self.sink.apply(records)

    def close(self) -> None:
        self.sink.close()

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []

        def run(conn: Any) -> None:
            out.extend(conn.execute(sql, params).fetchall())

        self.sink._run("read back its beliefs", run)
        return out

    def held_beliefs(self, tenant: str) -> Iterator[list[Mapping[str, Any]]]:
        from memory_core.mirrors.postgres import COLUMNS, SCHEMA

        self.sink.open()
        table, key, cols = COLUMNS["belief"]
        names = [c for c, _, _ in cols]
        kinds = {c: t for c, t, _ in cols}
        after = ""
        while rows := self._rows(
                f"SELECT {key}, {', '.join(names)} FROM {SCHEMA}.{table} WHERE tenant = %s "
                f"AND {key} > %s ORDER BY {key} LIMIT %s", (tenant, after, PAGE)):
            page: list[Mapping[str, Any]] = []
            for row in rows:
                fields: dict[str, Any] = {key: row[0]}
                for name, value in zip(names, row[1:], strict=True):
                    if value is not None and "timestamptz" in kinds[name]:
                        value = to_db(value)
                    fields[name] = value
                page.append({f: fields.get(f) for f in FACT_FIELDS})
            yield page
            after = rows[-1][0]

    def held_tenants(self) -> set[str]:
        from memory_core.mirrors.postgres import COLUMNS, SCHEMA

        self.sink.open()
        table = COLUMNS["belief"][0]
        return {r[0] for r in self._rows(f"SELECT DISTINCT tenant FROM {SCHEMA}.{table}", ())}


def reader_for(sink: MirrorSink) -> MirrorReader | None:
    """A reader of ``sink``'s mirror, or None when this mnemo cannot read that mirror back."""
    if hasattr(sink, "held_beliefs"):
        return sink  # type: ignore[return-value]
    if sink.name == "postgres":
        return PostgresReader(sink)
    return None
