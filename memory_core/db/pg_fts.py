"""Full-text search on the Postgres state store: the same tokens and the same bm25 as SQLite.

Per text table ``T`` (turns, episodes, beliefs) the index is two plain tables:
``T_fts_p (token, doc, tf)`` — the postings: every token is ``db.fts``'s tenant-namespaced
stem, so a term's postings are one tenant's rows — and ``T_fts_len (doc, tenant, len)``,
the row lengths; ``fts_stats`` holds each tenant's rows and tokens, as on SQLite. The view
``T_fts_v (term, doc)`` gives a term's document count (what ``recall.keyword.TermStats``
reads on either engine).

The tokens are made in Python (``db.fts.tokens``: Snowball English stems), so both engines
index exactly the same terms. A trigger on ``T`` (PL/pgSQL, no Python in the server) drops
a changed or deleted row's postings and length at once and queues the row in
``fts_pending``; the adapter's ``COMMIT`` (``pg_state``) calls ``flush``, which indexes the
queued rows in the same transaction. A search inside that transaction does not see them yet
(the state code never searches inside a write).

``ranked_ids`` is ``recall.keyword.ranked_ids`` in SQL over the postings: bm25 with FTS5's
constants, the tenant's N and average length, the same fill of the newest matches of the
common terms, the same order (ties: newest first).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from memory_core.db import fts as fts_index

TEXT_TABLES = tuple(fts_index.FTS_TABLES.values())


def ddl(schema: str) -> list[str]:
    """The postings tables, views, the trigger function and the triggers."""
    out = ["CREATE TABLE fts_pending (tbl text NOT NULL, doc bigint NOT NULL, "
           "PRIMARY KEY (tbl, doc))"]
    for base in TEXT_TABLES:
        out += [
            f"CREATE TABLE {base}_fts_p (token text NOT NULL, doc bigint NOT NULL, "
            "tf integer NOT NULL, PRIMARY KEY (token, doc))",
            f"CREATE INDEX {base}_fts_p_doc ON {base}_fts_p (doc)",
            f"CREATE TABLE {base}_fts_len (doc bigint PRIMARY KEY, tenant text NOT NULL, "
            "len integer NOT NULL)",
            f"CREATE VIEW {base}_fts_v AS SELECT token AS term, count(*) AS doc FROM "
            f"{base}_fts_p GROUP BY token",
        ]
    out.append(f"""
CREATE FUNCTION {schema}.fts_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path = {schema} AS $fn$
DECLARE l integer;
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    EXECUTE format('DELETE FROM %I WHERE doc = $1', TG_TABLE_NAME || '_fts_p') USING OLD.id;
    EXECUTE format('DELETE FROM %I WHERE doc = $1 RETURNING len', TG_TABLE_NAME || '_fts_len')
      INTO l USING OLD.id;
    IF l IS NOT NULL THEN
      UPDATE fts_stats SET rows = rows - 1, tokens = tokens - l
        WHERE tbl = TG_TABLE_NAME AND tenant = OLD.tenant;
    END IF;
  END IF;
  IF TG_OP = 'DELETE' THEN
    DELETE FROM fts_pending WHERE tbl = TG_TABLE_NAME AND doc = OLD.id;
  ELSE
    INSERT INTO fts_pending (tbl, doc) VALUES (TG_TABLE_NAME, NEW.id) ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END $fn$""")
    for base in TEXT_TABLES:
        out.append(f"CREATE TRIGGER {base}_fts AFTER INSERT OR DELETE OR UPDATE OF text ON "
                   f"{base} FOR EACH ROW EXECUTE FUNCTION {schema}.fts_changed()")
    return out


def flush(conn: Any) -> int:
    """Index the rows queued in ``fts_pending`` (inside the open transaction); how many."""
    raw = conn.raw
    if raw.info.transaction_status == 0:  # idle: nothing can be pending
        return 0
    pending = raw.execute("DELETE FROM fts_pending RETURNING tbl, doc").fetchall()
    if not pending:
        return 0
    by_table: dict[str, list[int]] = defaultdict(list)
    for tbl, doc in pending:
        by_table[tbl].append(doc)
    for base, docs in by_table.items():
        if base not in TEXT_TABLES:
            continue
        rows = raw.execute(f"SELECT id, tenant, text FROM {base} WHERE id = ANY(%s)",
                           (docs,)).fetchall()
        postings: list[tuple[str, int, int]] = []
        lengths: list[tuple[int, str, int]] = []
        stats: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for doc, tenant, text in rows:
            toks = fts_index.tokens(str(text or ""))
            prefix = fts_index.tenant_prefix(tenant)
            postings += [(prefix + t, doc, n) for t, n in Counter(toks).items()]
            lengths.append((doc, tenant, len(toks)))
            stats[tenant][0] += 1
            stats[tenant][1] += len(toks)
        with raw.cursor() as cur:
            cur.executemany(f"INSERT INTO {base}_fts_p (token, doc, tf) VALUES (%s, %s, %s)",
                            postings)
            cur.executemany(f"INSERT INTO {base}_fts_len (doc, tenant, len) VALUES "
                            "(%s, %s, %s)", lengths)
            cur.executemany(
                "INSERT INTO fts_stats (tbl, tenant, rows, tokens) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (tbl, tenant) DO UPDATE SET rows = fts_stats.rows + "
                "excluded.rows, tokens = fts_stats.tokens + excluded.tokens",
                [(base, t, r, n) for t, (r, n) in sorted(stats.items())])
    return len(pending)


def rebuild(conn: Any, base: str) -> None:
    """Index every row of ``base`` from scratch (inside the caller's transaction)."""
    raw = conn.raw
    raw.execute(f"DELETE FROM {base}_fts_p")
    raw.execute(f"DELETE FROM {base}_fts_len")
    raw.execute("DELETE FROM fts_stats WHERE tbl = %s", (base,))
    raw.execute(f"INSERT INTO fts_pending (tbl, doc) SELECT %s, id FROM {base} "
                "ON CONFLICT DO NOTHING", (base,))
    flush(conn)


_SCORED = """
WITH q(tok, ess) AS (SELECT * FROM unnest(%(toks)s::text[], %(ess)s::int[])),
p AS MATERIALIZED (SELECT q.tok, q.ess, f.doc, f.tf FROM q JOIN {t}_fts_p f ON f.token = q.tok),
w AS MATERIALIZED (SELECT tok, greatest(ln((%(n)s::float8 - count(*) + 0.5)
    / (count(*) + 0.5)), {min_idf}) AS idf FROM p GROUP BY tok),
s AS MATERIALIZED (SELECT p.doc AS doc, max(p.ess) AS ess,
    sum(w.idf * p.tf * ({k1} + 1) / (p.tf + {k1} * (1 - {b} + {b} * z.len / %(avg)s::float8)))
    AS score
  FROM p JOIN w ON w.tok = p.tok JOIN {t}_fts_len z ON z.doc = p.doc GROUP BY p.doc)
"""
_RANKED = "SELECT doc FROM s ORDER BY score DESC, doc DESC"
_RANKED_AND_FILL = """SELECT doc FROM (
  SELECT doc, score, 0 AS part FROM s WHERE ess = 1
  UNION ALL SELECT doc, score, 1 FROM (
    SELECT doc, score FROM s WHERE ess = 0 ORDER BY doc DESC LIMIT %(window)s) AS f) AS r
ORDER BY part, score DESC, doc DESC"""


def ranked_ids(conn: Any, table: str, tokens: list[str], essential: set[str], rows: int,
               total: int, window: int, *, k1: float, b: float, min_idf: float) -> list[int]:
    """``recall.keyword.ranked_ids`` over the postings (the caller made the tokens)."""
    fill = window > 0 and len(essential) < len(tokens)
    sql = _SCORED.format(t=table, k1=k1, b=b, min_idf=min_idf) + (
        _RANKED_AND_FILL if fill else _RANKED)
    params = {"toks": tokens, "ess": [int(t in essential) for t in tokens], "n": rows,
              "avg": total / rows if total > 0 else 1.0, "window": max(0, window)}
    return [r[0] for r in conn.raw.execute(sql, params)]
