"""The SQLite dialect the state code speaks, rewritten for PostgreSQL in one place.

The model, write and recall code write SQLite SQL (``?`` parameters, ``INSERT OR IGNORE``,
scalar ``max(a, b)``, ...). When the state store is Postgres (``MNEMO_STATE_BACKEND``), the
connection adapter (``db.pg_state``) passes each statement through ``to_postgres`` first:

- ``?`` and ``?NNN`` become ``%s`` (numbered ones reorder the parameters), ``:name`` becomes
  ``%(name)s``, a literal ``%`` becomes ``%%``;
- ``INSERT OR IGNORE INTO`` becomes ``INSERT INTO ... ON CONFLICT DO NOTHING``;
- ``BEGIN IMMEDIATE`` becomes ``BEGIN`` (the adapter takes the write lock itself);
- ``NOT INDEXED`` and ``INDEXED BY ix`` are dropped, ``group_concat`` is ``string_agg``,
  ``CROSS JOIN t ON`` is ``JOIN t ON``, scalar ``max``/``min`` of two or more arguments
  are ``greatest``/``least``, a unary ``+column`` is the column;
- ``a IS b`` / ``a IS NOT b`` (b not NULL) are ``IS [NOT] DISTINCT FROM``;
- a derived table without an alias gets one (PostgreSQL 15 requires it);
- ``x IN (?, ?, ...)`` of plain parameters is ``x = ANY(%s)`` with one array parameter: the
  statement's text no longer depends on how many values a call passes, so psycopg prepares
  it once and the server plans it once (planning a recall's statements anew each time cost
  more than running them).

Anything this does not know how to say in PostgreSQL (``INSERT OR REPLACE``, ``PRAGMA``,
``GLOB``, ``sqlite_master``) is refused with ``DialectError`` naming it, never sent as is:
the engine-specific statements go through ``engine`` hooks instead (vectors, full text).
Quoted strings and identifiers are never rewritten.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.errors import StoreError

SCHEMA = "mnemo_primary"  # the Postgres primary's schema
# Tables whose rows get an ``id`` from a bigint identity (an INSERT returns it: lastrowid).
ID_TABLES = frozenset({"turns", "episodes", "entities", "entity_merges",
                       "entity_merges_archive", "beliefs", "outbox", "tombstones"})


def is_postgres(conn: Any) -> bool:
    """Whether ``conn`` is the Postgres primary's (the engine hooks branch on it). Light:
    the chat path imports this without psycopg."""
    return getattr(conn, "dialect", None) == "postgres"


def driver_errors() -> tuple[type[BaseException], ...]:
    """The database drivers' error classes: SQLite's, and psycopg's once it is loaded (a
    process on the Postgres primary). For ``except``: recall degrades on either."""
    import sys

    from memory_core.db.sqlite import sqlite_module

    pg = sys.modules.get("psycopg")
    return (sqlite_module().Error, pg.Error) if pg is not None else (sqlite_module().Error,)


class DialectError(StoreError):
    """A statement uses SQLite SQL that has no rewrite for PostgreSQL (a bug in mnemo)."""


_TOKEN = re.compile(r"""
    (?P<str>'(?:[^']|'')*')
  | (?P<ident>"(?:[^"]|"")*")
  | (?P<param>\?\d*)
  | (?P<named>(?<!:):[A-Za-z_][A-Za-z_0-9]*)
  | (?P<word>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)

_REFUSED = {"PRAGMA", "GLOB", "SQLITE_MASTER", "REPLACE_INTO"}
# Words after which a closing parenthesis of a derived table is followed by no alias.
_CLAUSE = {"WHERE", "ORDER", "GROUP", "LIMIT", "UNION", "JOIN", "ON", "LEFT", "CROSS",
           "INNER", "HAVING", "EXCEPT", "INTERSECT", "WINDOW", "OFFSET", "RETURNING"}


@dataclass(frozen=True)
class Rewritten:
    sql: str
    order: tuple[int, ...] | None  # numbered parameters: which input each %s takes
    plain_count: int  # plain ``?`` parameters (mutually exclusive with numbered ones)
    insert_table: str | None  # the table of a single-table INSERT (for RETURNING id)
    ignore: bool  # was INSERT OR IGNORE
    # Plain-parameter lists sent as one array each: (index of the first, how many).
    packed: tuple[tuple[int, int], ...] = ()


def _tokens(sql: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(sql)]


def _next_word(toks: list[tuple[str, str]], i: int) -> tuple[int, str]:
    """Index and upper-cased text of the first non-space token at or after ``i``."""
    while i < len(toks) and toks[i][0] == "space":
        i += 1
    return (i, toks[i][1].upper()) if i < len(toks) else (i, "")


_BEFORE_OPERAND = {"AND", "OR", "WHERE", "ON", "NOT", "WHEN", "THEN", "ELSE", "SELECT", "BY",
                   "(", ",", "=", "<", ">", "<=", ">=", "<>", "!="}


def _unary(out: list[str]) -> bool:
    """Whether a ``+`` after what ``out`` holds so far is a unary plus."""
    prev = next((t for t in reversed(out) if t.strip()), "")
    return prev.strip().upper() in _BEFORE_OPERAND


@functools.cache
def _columns(table: str) -> frozenset[str]:
    from memory_core.db import schema_state  # SQLAlchemy: loaded only with the primary

    found = schema_state.metadata.tables.get(table)
    return frozenset(c.name for c in found.columns) if found is not None else frozenset()


def _bare_operand(toks: list[tuple[str, str]], i: int) -> bool:
    """A column name at ``toks[i]`` that is read, not assigned and not qualified."""
    prev = next((t[1] for t in reversed(toks[:i]) if t[0] != "space"), "")
    _, nxt = _next_word(toks, i + 1)
    if prev == "." or nxt in (".", "("):
        return False
    return not (nxt == "=" and prev.upper() in ("SET", ","))


def _matching(toks: list[tuple[str, str]], i: int) -> tuple[int, int]:
    """For ``toks[i] == '('``: the index of its ``)`` and its top-level comma count."""
    depth, commas = 0, 0
    for j in range(i, len(toks)):
        text = toks[j][1]
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return j, commas
        elif text == "," and depth == 1:
            commas += 1
    raise DialectError("unbalanced parentheses in a statement")


def _param_list(toks: list[tuple[str, str]], i: int) -> tuple[int, int] | None:
    """For ``IN`` at ``toks[i]``: when a list of plain ``?`` alone follows, the index of its
    ``)`` and how many; else None."""
    j, nxt = _next_word(toks, i + 1)
    if nxt != "(":
        return None
    count, expect_param = 0, True
    for k in range(j + 1, len(toks)):
        kind, text = toks[k]
        if kind == "space":
            continue
        if expect_param and kind == "param" and text == "?":
            count, expect_param = count + 1, False
        elif not expect_param and text == ",":
            expect_param = True
        elif not expect_param and text == ")":
            return k, count
        else:
            return None
    return None


@functools.lru_cache(maxsize=2048)
def _rewrite(sql: str) -> Rewritten:
    toks = _tokens(sql)
    out: list[str] = []
    order: list[int] = []
    plain = 0
    ignore = False
    insert_table: str | None = None
    alias_after: set[int] = set()  # indexes of ')' closing an alias-less derived table
    counter = 0
    upsert_columns: frozenset[str] = frozenset()  # inside ON CONFLICT ... DO UPDATE SET
    packed: list[tuple[int, int]] = []
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        upper = text.upper()
        listed = _param_list(toks, i) if kind == "word" and upper == "IN" else None
        if listed is not None and next((t for t in reversed(out) if t.strip()),
                                       "").upper() != "NOT":
            packed.append((plain, listed[1]))
            plain += listed[1]
            out.append("= ANY(%s)")
            i = listed[0] + 1
            continue
        if kind == "word" and upper == "UPDATE" and insert_table and out and \
                next((t for t in reversed(out) if t.strip()), "").upper() == "DO":
            upsert_columns = _columns(insert_table)
        if kind == "word" and upsert_columns and text.lower() in upsert_columns \
                and _bare_operand(toks, i):
            # "count = count + 1" after DO UPDATE SET: PostgreSQL needs the table named
            out.append(f"{insert_table}.{text}")
        elif kind == "named":
            out.append(f"%({text[1:]})s")
        elif kind == "param":
            if len(text) > 1:
                order.append(int(text[1:]) - 1)
            else:
                plain += 1
            # "? IS NULL": PostgreSQL must know the parameter's type; only nullness counts
            out.append("%s::text" if _next_word(toks, i + 1)[1] == "IS" else "%s")
        elif text == "+" and _unary(out):
            pass  # SQLite's "+column" (no index for this term): a plain column here
        elif text == "%" or (kind == "str" and "%" in text):
            out.append(text.replace("%", "%%"))  # psycopg reads % even inside literals
        elif kind == "word" and upper in _REFUSED:
            raise DialectError(f"SQLite-only SQL ({text}) reached the Postgres state store: "
                               "this is a bug in mnemo, please report it")
        elif kind == "word" and upper == "INSERT":
            j, nxt = _next_word(toks, i + 1)
            if nxt == "OR":
                k, what = _next_word(toks, j + 1)
                if what != "IGNORE":
                    raise DialectError(f"SQLite-only SQL (INSERT OR {what}) reached the "
                                       "Postgres state store: this is a bug in mnemo")
                ignore = True
                i = k
            j, nxt = _next_word(toks, i + 1)
            if nxt == "INTO":
                k, table = _next_word(toks, j + 1)
                insert_table = table.lower()
            out.append("INSERT")
        elif kind == "word" and upper == "IS":
            # SQLite's "a IS b" / "a IS NOT b" compare any values, NULL included
            j, nxt = _next_word(toks, i + 1)
            negated = nxt == "NOT"
            k, operand = _next_word(toks, j + 1) if negated else (j, nxt)
            if operand in ("NULL", "TRUE", "FALSE", "DISTINCT"):
                out.append(text)
            else:
                out.append("IS DISTINCT FROM" if negated else "IS NOT DISTINCT FROM")
                i = j if negated else i
        elif kind == "word" and upper == "BEGIN":
            j, nxt = _next_word(toks, i + 1)
            out.append("BEGIN")
            if nxt in ("IMMEDIATE", "DEFERRED", "EXCLUSIVE"):
                i = j
        elif kind == "word" and upper == "NOT" and _next_word(toks, i + 1)[1] == "INDEXED":
            i = _next_word(toks, i + 1)[0]
        elif kind == "word" and upper == "INDEXED" and _next_word(toks, i + 1)[1] == "BY":
            i = _next_word(toks, _next_word(toks, i + 1)[0] + 1)[0]  # the planner chooses
        elif kind == "word" and upper == "GROUP_CONCAT":
            out.append("string_agg")
        elif kind == "word" and upper == "CROSS":
            # "CROSS JOIN t [alias] ON ...": PostgreSQL takes no ON after CROSS JOIN
            j, _ = _next_word(toks, i + 1)
            k, _ = _next_word(toks, j + 1)
            m, after = _next_word(toks, k + 1)
            if after not in ("ON", "") and toks[m][0] == "word":
                m, after = _next_word(toks, m + 1)
            out.append("" if after == "ON" else text)
        elif kind == "word" and upper in ("MAX", "MIN"):
            j, nxt = _next_word(toks, i + 1)
            if nxt == "(" and _matching(toks, j)[1] >= 1:
                out.append("greatest" if upper == "MAX" else "least")
            else:
                out.append(text)
        elif kind == "other" and text == "(":
            # a derived table: "FROM (SELECT" / "JOIN (SELECT" without an alias after it
            prev = next((t[1].upper() for t in reversed(toks[:i]) if t[0] != "space"), "")
            if prev in ("FROM", "JOIN") and _next_word(toks, i + 1)[1] == "SELECT":
                close, _ = _matching(toks, i)
                _, after = _next_word(toks, close + 1)
                if after in _CLAUSE or after in ("", ")", ";"):
                    alias_after.add(close)
            out.append(text)
        elif kind == "other" and text == ")" and i in alias_after:
            counter += 1
            out.append(f") AS _d{counter}")
        else:
            out.append(text)
        i += 1
    if order and plain:
        raise DialectError("a statement mixes ? and ?NNN parameters")
    body = "".join(out)
    if ignore:
        body = _add_on_conflict(body)
    if order and packed:
        raise DialectError("a statement mixes ?NNN parameters and IN lists of ?")
    return Rewritten(body, tuple(order) if order else None, plain, insert_table, ignore,
                     tuple(packed))


def _add_on_conflict(body: str) -> str:
    """Put ``ON CONFLICT DO NOTHING`` at the end of the INSERT, before any RETURNING."""
    stripped = body.rstrip().rstrip(";")
    m = re.search(r"\sRETURNING\s", stripped, re.IGNORECASE)
    if m:
        return f"{stripped[:m.start()]} ON CONFLICT DO NOTHING{stripped[m.start():]}"
    return f"{stripped} ON CONFLICT DO NOTHING"


def to_postgres(sql: str, params: Sequence[Any] | None) -> tuple[Rewritten, list[Any]]:
    """``sql`` and ``params`` as PostgreSQL and psycopg take them (see the module)."""
    r = _rewrite(sql)
    if isinstance(params, Mapping):  # :name parameters
        return r, params
    args = list(params) if params is not None else []
    if r.order is not None:
        args = [args[k] for k in r.order]
    for start, count in reversed(r.packed):  # from the end: earlier indexes stay valid
        args[start:start + count] = [[int(a) if isinstance(a, bool) else a
                                      for a in args[start:start + count]]]
    return r, args
