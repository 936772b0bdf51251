"""Databases: the connection factory, schemas, migrations and the two stores."""

from memory_core.db.sqlite import atomic, connect, sqlite_module
from memory_core.db.stores import Database, migrate_stores, open_ops, open_state

__all__ = [
    "Database", "atomic", "connect", "migrate_stores", "open_ops", "open_state", "sqlite_module",
]
