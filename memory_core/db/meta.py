"""The state store's ``meta`` table: one value per key, read and written by every part that
keeps a fact about the store (its embedder and vector generation, the extractor rules it
ran, a reconsolidation run's progress).

Each function is one statement with bound parameters, on SQLite and on the Postgres primary
alike; a write joins the caller's transaction (the caller commits it with the effect it
records).
"""

from __future__ import annotations

from typing import Any

_UPSERT = ("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
           "SET value = excluded.value")
_ONCE = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"


def get_meta(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def get_metas(conn: Any, *keys: str) -> dict[str, str]:
    """The values of those of ``keys`` that are set, in one statement (one round trip on the
    Postgres primary)."""
    if not keys:
        return {}
    rows = conn.execute(f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))})",
                        keys).fetchall()
    return {str(k): str(v) for k, v in rows}


def meta_by_prefix(conn: Any, prefix: str) -> dict[str, str]:
    """What follows ``prefix`` -> value, for every key starting with ``prefix``. Compared
    by ``substr`` equality, never by a range of keys: under a linguistic collation (a
    Postgres database created with an ICU or glibc ``en`` locale) "reextracted:t1" does not
    sort below "reextracted;", and a range would find nothing. The table is small (a few
    keys per tenant at most), so the scan costs nothing."""
    if not prefix:
        raise ValueError("meta_by_prefix needs a non-empty prefix")
    rows = conn.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?",
                        (len(prefix), prefix)).fetchall()
    return {str(k)[len(prefix):]: str(v) for k, v in rows}


def set_meta(conn: Any, key: str, value: str) -> None:
    """Set ``key`` (replacing its value)."""
    conn.execute(_UPSERT, (key, value))


def set_meta_once(conn: Any, key: str, value: str) -> None:
    """Set ``key`` unless it is set already (the first value stays)."""
    conn.execute(_ONCE, (key, value))
