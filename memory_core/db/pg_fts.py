"""Full-text search on the Postgres state store: the same tokens and the same bm25 as SQLite.

Per text table ``T`` (turns, episodes, beliefs) the index is two plain tables:
``T_fts_p (token, doc, tf)`` — the postings: every token is ``db.fts``'s tenant-namespaced
stem, so a term's postings are one tenant's rows — and ``T_fts_len (doc, tenant, len)``,
the row lengths; ``fts_stats`` holds each tenant's rows and tokens, as on SQLite. The view
``T_fts_v (term, doc)`` gives a term's document count (what ``recall.keyword.TermStats``
reads on SQLite; here it reads ``doc_counts``, which stops counting at a cap).

The tokens are made in Python (``db.fts.tokens``: Snowball English stems), so both engines
index exactly the same terms. A trigger on ``T`` (PL/pgSQL, no Python in the server) drops
a changed or deleted row's postings and length at once and queues the row in
``fts_pending``; the adapter's ``COMMIT`` (``pg_state``) calls ``flush``, which indexes the
queued rows in the same transaction. A search inside that transaction does not see them yet
(the state code never searches inside a write).

``postings`` reads what ``recall.keyword.ranked_ids`` ranks, as FTS5 gives it on SQLite:
the essential terms' postings, the newest rows holding only the other terms, the other
terms' postings in those rows and their document counts; bm25 and the order are computed
by the same Python code on both engines, so the same rows come out in the same order.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

from memory_core.db import fts as fts_index
from memory_core.errors import StoreError

TEXT_TABLES = tuple(fts_index.FTS_TABLES.values())
FLUSH_CHUNK = 5_000  # rows read, tokenised and written at once


def index_tables() -> list[str]:
    """The tables the full-text index adds to the state tables (emptied with them)."""
    return ["fts_pending"] + [f"{b}_fts_{k}" for b in TEXT_TABLES for k in ("p", "len")]


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
        if base in TEXT_TABLES:
            for start in range(0, len(docs), FLUSH_CHUNK):
                _index(raw, base, docs[start:start + FLUSH_CHUNK])
    return len(pending)


def _index(raw: Any, base: str, docs: list[int]) -> None:
    """Write the postings, lengths and statistics of ``docs`` of ``base`` (``COPY``: a
    promote indexes millions of rows here, a commit a few)."""
    rows = raw.execute(f"SELECT id, tenant, text FROM {base} WHERE id = ANY(%s)",
                       (docs,)).fetchall()
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    lengths: list[tuple[int, str, int]] = []
    with raw.cursor() as cur:
        with cur.copy(f"COPY {base}_fts_p (token, doc, tf, len) FROM STDIN") as copy:
            for doc, tenant, text in rows:
                toks = fts_index.tokens(str(text or ""))
                prefix = fts_index.tenant_prefix(tenant)
                for t, n in Counter(toks).items():
                    copy.write_row((prefix + t, doc, n, len(toks)))
                lengths.append((doc, tenant, len(toks)))
                stats[tenant][0] += 1
                stats[tenant][1] += len(toks)
        with cur.copy(f"COPY {base}_fts_len (doc, tenant, len) FROM STDIN") as copy:
            for row in lengths:
                copy.write_row(row)
        cur.executemany(
            "INSERT INTO fts_stats (tbl, tenant, rows, tokens) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (tbl, tenant) DO UPDATE SET rows = fts_stats.rows + "
            "excluded.rows, tokens = fts_stats.tokens + excluded.tokens",
            [(base, t, r, n) for t, (r, n) in sorted(stats.items())])


@contextlib.contextmanager
def bulk_load(conn: Any) -> Iterator[None]:
    """Inside the caller's transaction, with every postings table empty (a promote): drop
    the postings' indexes for the load and build them once at the end — a sorted build is
    many times faster than millions of random inserts into the same B-trees."""
    raw = conn.raw
    for base in TEXT_TABLES:
        if raw.execute(f"SELECT 1 FROM {base}_fts_p LIMIT 1").fetchone():
            raise StoreError(f"{base}_fts_p is not empty: a bulk load starts from nothing")
        raw.execute(f"ALTER TABLE {base}_fts_p DROP CONSTRAINT {base}_fts_p_pkey")
        raw.execute(f"DROP INDEX {base}_fts_p_doc")
    yield
    raw.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for base in TEXT_TABLES:
        raw.execute(f"ALTER TABLE {base}_fts_p ADD CONSTRAINT {base}_fts_p_pkey PRIMARY KEY "
                    "(token, doc) INCLUDE (tf, len)")
        raw.execute(f"CREATE INDEX {base}_fts_p_doc ON {base}_fts_p (doc)")


def rebuild(conn: Any, base: str) -> None:
    """Index every row of ``base`` from scratch (inside the caller's transaction)."""
    raw = conn.raw
    raw.execute(f"DELETE FROM {base}_fts_p")
    raw.execute(f"DELETE FROM {base}_fts_len")
    raw.execute("DELETE FROM fts_stats WHERE tbl = %s", (base,))
    raw.execute(f"INSERT INTO fts_pending (tbl, doc) SELECT %s, id FROM {base} "
                "ON CONFLICT DO NOTHING", (base,))
    flush(conn)


# What a search ranks, in one statement: rows of (kind, token number from 1, doc, value,
# length). Kind 0: an essential token's postings (all of them: their rows are ranked), tf and
# the row's length; 1: the newest ``window`` rows holding an other token and no essential
# one, with their length (each token's postings walked backwards, at most ``window`` of
# them); 2: an other token's postings in those ranked rows, tf (a probe per ranked row and
# token); 3: an other token's document frequency (its postings counted, up to half the
# tenant's rows: a term in half of them or more has bm25's floored idf whatever its count,
# and a word in most of a large tenant's rows has hundreds of thousands); 4: the tenant's
# rows and tokens (``fts_stats``). Everything comes from the postings' primary key, which
# holds tf and the row's length (``index_ddl``): no table row is read.
_POSTINGS = """
WITH e AS MATERIALIZED (
  SELECT q.n, f.doc, f.tf, f.len FROM unnest(%(ess)s::text[]) WITH ORDINALITY AS q(tok, n)
  JOIN {t}_fts_p f ON f.token = q.tok),
fill AS MATERIALIZED (
  SELECT DISTINCT x.doc, x.len FROM unnest(%(oth)s::text[]) AS o(tok) CROSS JOIN LATERAL (
    SELECT f.doc, f.len FROM {t}_fts_p f WHERE f.token = o.tok
      AND f.doc NOT IN (SELECT doc FROM e) ORDER BY f.doc DESC LIMIT %(window)s) AS x
  ORDER BY x.doc DESC LIMIT %(window)s),
r AS MATERIALIZED (SELECT doc FROM e UNION SELECT doc FROM fill)
SELECT 0, e.n, e.doc, e.tf, e.len FROM e
UNION ALL SELECT 1, 0, fill.doc, 0, fill.len FROM fill
UNION ALL SELECT 2, q.n, r.doc, x.tf, 0
  FROM unnest(%(oth)s::text[]) WITH ORDINALITY AS q(tok, n) CROSS JOIN r
  CROSS JOIN LATERAL (SELECT f.tf FROM {t}_fts_p f WHERE f.token = q.tok AND f.doc = r.doc
                      LIMIT 1) AS x
UNION ALL SELECT 3, q.n, 0, (SELECT count(*) FROM (SELECT 1 FROM {t}_fts_p f
    WHERE f.token = q.tok LIMIT (SELECT (s.rows + 1) / 2 FROM fts_stats s
                                 WHERE s.tbl = %(tbl)s AND s.tenant = %(tenant)s)) AS c), 0
  FROM unnest(%(oth)s::text[]) WITH ORDINALITY AS q(tok, n)
UNION ALL SELECT 4, 0, 0, s.rows, s.tokens FROM fts_stats s
  WHERE s.tbl = %(tbl)s AND s.tenant = %(tenant)s
"""

# Each token's document count, or ``cap`` when it has that many or more: the walk along the
# postings' primary key stops after ``cap`` entries (LIMIT NULL: no cap, all counted).
_DOC_COUNTS = ("SELECT q.tok, (SELECT count(*) FROM (SELECT 1 FROM {t}_fts_p f WHERE "
               "f.token = q.tok LIMIT %(cap)s) AS s) FROM unnest(%(toks)s::text[]) AS q(tok)")


def doc_counts(conn: Any, table: str, tokens: list[str], cap: int = 0) -> dict[str, int]:
    """Rows of ``table`` holding each of ``tokens`` (tenant tokens), counted up to ``cap``
    (0: exactly): a token as common as ``cap`` costs ``cap`` index entries, not all of its
    postings (a term in most of a large tenant's rows has hundreds of thousands)."""
    rows = conn.raw.execute(_DOC_COUNTS.format(t=table),
                            {"toks": tokens, "cap": cap if cap > 0 else None}).fetchall()
    return {str(tok): int(n) for tok, n in rows}


# Per token (the essential ones, then the others): its document frequency and {row: tf}.
Found = list[tuple[int, dict[int, int]]]


def postings(conn: Any, table: str, tenant: str, essential: list[str], others: list[str],
             window: int) -> tuple[Found, dict[int, int], set[int], tuple[int, int]]:
    """What ``recall.keyword.ranked_ids`` ranks, read from the postings in one statement:
    (per token its document frequency and frequencies in the ranked rows, the ranked rows'
    lengths, the rows holding an essential token, the tenant's (rows, tokens)). The same as
    SQLite's FTS5 and ``fts_stats`` give it."""
    ess_tfs: list[dict[int, int]] = [{} for _ in essential]
    oth_tfs: list[dict[int, int]] = [{} for _ in others]
    dfs = [0] * len(others)
    size: dict[int, int] = {}
    stats = (0, 0)
    params = {"ess": essential, "oth": others, "window": max(0, window), "tbl": table,
              "tenant": tenant}
    for kind, n, doc, value, length in conn.raw.execute(_POSTINGS.format(t=table), params):
        if kind == 0:
            ess_tfs[n - 1][doc] = value
            size[doc] = length
        elif kind == 1:
            size[doc] = length
        elif kind == 2:
            oth_tfs[n - 1][doc] = value
        elif kind == 3:
            dfs[n - 1] = value
        else:
            stats = (int(value), int(length))
    first = {doc for tfs in ess_tfs for doc in tfs}
    found = [(len(t), t) for t in ess_tfs] + list(zip(dfs, oth_tfs, strict=True))
    return found, size, first, stats


def index_ddl() -> list[str]:
    """Primary migration 4: each posting carries its row's length, and the primary key holds
    tf and length (``INCLUDE``), so a search reads the index alone — one range per term,
    no table row and no ``_fts_len`` lookup per ranked row."""
    out = []
    for base in TEXT_TABLES:
        t = f"{base}_fts_p"
        out += [f"ALTER TABLE {t} ADD COLUMN len integer NOT NULL DEFAULT 0",
                f"UPDATE {t} p SET len = z.len FROM {base}_fts_len z WHERE z.doc = p.doc",
                f"ALTER TABLE {t} ALTER COLUMN len DROP DEFAULT",
                f"ALTER TABLE {t} DROP CONSTRAINT {t}_pkey",
                f"ALTER TABLE {t} ADD CONSTRAINT {t}_pkey PRIMARY KEY (token, doc) "
                "INCLUDE (tf, len)"]
    return out
