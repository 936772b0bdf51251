"""The SQLite-to-PostgreSQL rewrite of the state code's statements (``db.dialect``)."""

from __future__ import annotations

import pytest

from memory_core.db.dialect import DialectError, to_postgres


def pg(sql: str, params=()):
    r, args = to_postgres(sql, params)
    return " ".join(r.sql.split()), args


@pytest.mark.parametrize(("sqlite", "postgres"), [
    ("SELECT a FROM t WHERE x = ? AND y = ?", "SELECT a FROM t WHERE x = %s AND y = %s"),
    ("INSERT OR IGNORE INTO tenants (tenant, created_at) VALUES (?, ?)",
     "INSERT INTO tenants (tenant, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"),
    ("BEGIN IMMEDIATE", "BEGIN"),
    ("SELECT id FROM beliefs b NOT INDEXED WHERE b.id = ?",
     "SELECT id FROM beliefs b WHERE b.id = %s"),
    ("SELECT b.id FROM beliefs b INDEXED BY ix_beliefs_subject WHERE b.x = ?",
     "SELECT b.id FROM beliefs b WHERE b.x = %s"),
    ("SELECT 1 WHERE a IS NOT b AND c IS d AND e IS NOT NULL AND f IS NULL",
     "SELECT 1 WHERE a IS DISTINCT FROM b AND c IS NOT DISTINCT FROM d AND e IS NOT NULL "
     "AND f IS NULL"),
    ("SELECT 1 FROM t WHERE tenant = :tenant AND x >= :lo",
     "SELECT 1 FROM t WHERE tenant = %(tenant)s AND x >= %(lo)s"),
    ("SELECT 1 FROM t WHERE (? IS NULL OR idx = ?)",
     "SELECT 1 FROM t WHERE (%s::text IS NULL OR idx = %s)"),
    ("SELECT group_concat(t.uid, ' ' ORDER BY t.idx) FROM t",
     "SELECT string_agg(t.uid, ' ' ORDER BY t.idx) FROM t"),
    ("UPDATE episodes SET importance = max(importance, ?)",
     "UPDATE episodes SET importance = greatest(importance, %s)"),
    ("SELECT max(idx) FROM turns", "SELECT max(idx) FROM turns"),
    ("SELECT x FROM h CROSS JOIN beliefs b ON b.id = h.id",
     "SELECT x FROM h JOIN beliefs b ON b.id = h.id"),
    ("SELECT x FROM a CROSS JOIN b", "SELECT x FROM a CROSS JOIN b"),
    ("SELECT n FROM (SELECT 1 AS n) WHERE n = 1",
     "SELECT n FROM (SELECT 1 AS n) AS _d1 WHERE n = 1"),
    ("SELECT n FROM (SELECT 1 AS n) s WHERE n = 1", "SELECT n FROM (SELECT 1 AS n) s WHERE n = 1"),
    ("SELECT 1 FROM b WHERE b.s = 'a' AND +b.o IS NULL",
     "SELECT 1 FROM b WHERE b.s = 'a' AND b.o IS NULL"),
    ("DELETE FROM meta WHERE key LIKE 'reindex_cursor:%'",
     "DELETE FROM meta WHERE key LIKE 'reindex_cursor:%%'"),
    ("SELECT '?', \"a?\" FROM t WHERE x = ?", "SELECT '?', \"a?\" FROM t WHERE x = %s"),
    ("INSERT INTO hygiene_rejections (tenant, reason, count, last_at) VALUES (?, ?, ?, ?) "
     "ON CONFLICT (tenant, reason) DO UPDATE SET count = count + excluded.count, "
     "last_at = excluded.last_at",
     "INSERT INTO hygiene_rejections (tenant, reason, count, last_at) VALUES (%s, %s, %s, %s) "
     "ON CONFLICT (tenant, reason) DO UPDATE SET count = hygiene_rejections.count + "
     "excluded.count, last_at = excluded.last_at"),
])
def test_statements_are_rewritten(sqlite: str, postgres: str) -> None:
    assert pg(sqlite)[0] == postgres


def test_a_list_of_parameters_is_one_array_whatever_its_length() -> None:
    """``IN (?, ...)`` is ``= ANY(%s)``: one statement text for any number of values (psycopg
    prepares it, the server plans it once); NOT IN and lists with other items stay."""
    sql = "SELECT a FROM t WHERE x = ? AND id IN (?, ?,?) AND y NOT IN (?, ?) AND z IN (?)"
    assert pg(sql, [1, 2, 3, 4, 5, 6, True]) == (
        "SELECT a FROM t WHERE x = %s AND id = ANY(%s) AND y NOT IN (%s, %s) AND "
        "z = ANY(%s)", [1, [2, 3, 4], 5, 6, [1]])
    assert pg("SELECT a FROM t WHERE id IN (?)", ["u"])[0] == pg(
        "SELECT a FROM t WHERE id IN (?, ?, ?)", ["u", "v", "w"])[0]
    assert pg("SELECT a FROM t WHERE b IN (?, 1) AND c IN (SELECT d FROM e)", [5]) == (
        "SELECT a FROM t WHERE b IN (%s, 1) AND c IN (SELECT d FROM e)", [5])


def test_numbered_parameters_are_reordered_and_repeated() -> None:
    sql, args = pg("SELECT ?2, ?1, ?2", ["a", "b"])
    assert sql == "SELECT %s, %s, %s"
    assert args == ["b", "a", "b"]


@pytest.mark.parametrize("sql", [
    "PRAGMA secure_delete = ON",
    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
    "SELECT name FROM sqlite_master",
    "SELECT 1 FROM t WHERE name GLOB ?",
])
def test_sqlite_only_statements_are_refused(sql: str) -> None:
    with pytest.raises(DialectError, match="SQLite-only SQL"):
        to_postgres(sql, ())
