"""Tables every mnemo database has: ``meta`` (key/value) and ``schema_migrations``."""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, Table, Text


def bookkeeping_tables(metadata: MetaData) -> tuple[Table, Table]:
    meta = Table(
        "meta", metadata,
        Column("key", Text, primary_key=True),
        Column("value", Text, nullable=False),
    )
    schema_migrations = Table(
        "schema_migrations", metadata,
        Column("version", Integer, primary_key=True),
        Column("name", Text, nullable=False),
        Column("applied_at", Text, nullable=False),
    )
    return meta, schema_migrations
