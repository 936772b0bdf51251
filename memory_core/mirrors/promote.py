"""`mnemo mirror promote`: switch a memory from its SQLite file to the Postgres primary.

Run with the processes of the memory stopped and ``MNEMO_STATE_BACKEND=sqlite`` (the
settings that name the file and, in ``MNEMO_POSTGRES_URL``, the mirror to promote). In order:

1. refuse while ``reconcile`` finds drift between the file and any configured mirror (the
   seed's rule: a missed tombstone would otherwise resurrect a dead fact), while a vector
   reindex is under way, or when the primary schema already holds a memory;
2. copy, in one Postgres transaction read from one SQLite read transaction: every state
   table row by row with its ids (``COPY``), the embedder record, the active generation's
   vectors; the full-text postings are made from the copied rows by the primary's own
   triggers (``db.pg_fts``), the id sequences are moved past the copied ids;
3. verify before commit: every table's row count, the vectors' count and each tenant's
   full-text statistics (rows and tokens: the same tokens as SQLite's index) equal the
   file's — a difference rolls everything back;
4. record the switch: ``promoted_from`` in the primary (same transaction), then
   ``promoted_to`` in the file, after which a process started on the file with the SQLite
   backend is refused (``db.primary.refuse_if_promoted``), naming the setting to use.

A crash before 4's commit leaves the primary empty (rerun); between the commit and the
file's mark, a rerun finds the primary ``promoted_from`` this file and copies it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory_core.clock import to_db, utcnow
from memory_core.db import pg_fts, pg_vectors, primary, schema_state
from memory_core.db.dialect import ID_TABLES
from memory_core.db.meta import get_meta, set_meta
from memory_core.db.sqlite import atomic
from memory_core.errors import ConfigurationError, StoreError
from memory_core.settings import Settings

# State tables the copy leaves out: the primary's own bookkeeping, and the full-text
# statistics its triggers rebuild from the copied rows (and which step 3 compares).
SKIP = frozenset({"meta", "schema_migrations", "fts_stats"})
META_KEYS = ("embedder_identity", "embedder_dim", "vector_generation", "fts_tokens")
# Copied with every key they start: the extractor rules' record (``write.reextract``).
META_PREFIXES = ("extractor_rules:", "reextracted:", "reextracted_at:")

Progress = Callable[[str], None]


@dataclass
class PromoteReport:
    target: str  # the primary's canonical URL
    dry_run: bool
    rows: dict[str, int] = field(default_factory=dict)
    vectors: dict[str, int] = field(default_factory=dict)
    mirrors_checked: list[str] = field(default_factory=list)
    promoted: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "dry_run": self.dry_run, "rows": self.rows,
                "vectors": self.vectors, "mirrors_checked": self.mirrors_checked,
                "promoted": self.promoted}


def _check_drift(settings: Settings, state: Any, say: Progress) -> list[str]:
    """Every configured mirror reconciled (dry run); ConfigurationError on any drift."""
    from memory_core.mirrors.outbox import configured_mirrors, make_sink
    from memory_core.mirrors.readers import reader_for
    from memory_core.mirrors.reconcile import reconcile

    checked = []
    for name in configured_mirrors(settings):
        sink = make_sink(settings, name)
        try:
            reader = reader_for(sink)
            if reader is None:
                continue
            report = reconcile(state.conn, reader, dry_run=True)
        finally:
            sink.close()
        totals = report.totals()
        say(f"reconcile {name}: {report.drift} drifted ({totals['dead']} dead, "
            f"{totals['missing']} missing, {totals['stale']} stale)")
        if report.drift:
            raise ConfigurationError(
                f"refusing to promote: the {name} mirror has drifted from the state db "
                f"({totals['dead']} dead, {totals['missing']} missing, {totals['stale']} "
                f"stale): run `mnemo mirror reconcile --sink {name}` until "
                f"`mnemo mirror reconcile --dry-run --sink {name}` exits 0, then promote")
        checked.append(name)
    return checked


def _tables() -> list[Any]:
    return [t for t in schema_state.metadata.sorted_tables if t.name not in SKIP]


def _counts(conn: Any) -> dict[str, int]:
    return {t.name: int(conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0])
            for t in _tables()}


def _copy_tables(src: Any, raw: Any, say: Progress) -> None:
    for table in _tables():
        cols = [c.name for c in table.columns]
        order = "id" if "id" in cols else "rowid"
        cur = src.execute(f"SELECT {', '.join(cols)} FROM {table.name} ORDER BY {order}")
        n = 0
        with raw.cursor() as pg, pg.copy(
                f"COPY {table.name} ({', '.join(cols)}) FROM STDIN") as copy:
            while rows := cur.fetchmany(2_000):
                for row in rows:
                    copy.write_row(row)
                n += len(rows)
        say(f"copied {table.name}: {n} rows")
        if table.name in ID_TABLES and n:
            raw.execute(f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"(SELECT max(id) FROM {table.name}))")


def _copy_meta_and_vectors(src: Any, dst: Any) -> dict[str, int]:
    from memory_core.vectors import VECTOR_BASES, stored_vector, vec_table

    meta = dict(src.execute("SELECT key, value FROM meta").fetchall())
    for key in (*META_KEYS, *sorted(k for k in meta if k.startswith(META_PREFIXES))):
        if key in meta:
            dst.raw.execute("INSERT INTO meta (key, value) VALUES (%s, %s)", (key, meta[key]))
    counts: dict[str, int] = {}
    if "vector_generation" not in meta:
        return counts
    gen, dim = int(meta["vector_generation"]), int(meta["embedder_dim"])
    for base in VECTOR_BASES:
        table = vec_table(base, gen)
        pg_vectors.create_table(dst, table, dim)
        rows = src.execute(f"SELECT rowid, tenant, embedding FROM {table}").fetchall()
        with dst.raw.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} (rowid, tenant, embedding) VALUES "
                            "(%s, %s, %s)", [(r[0], r[1], pg_vectors.param(
                                dst, stored_vector(r[2]))) for r in rows])
        counts[base] = len(rows)
    return counts


def _fts_stats(conn: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in conn.execute(
        "SELECT tbl, tenant, rows, tokens FROM fts_stats WHERE rows > 0").fetchall())


def _verify(src: Any, dst: Any, vectors: dict[str, int]) -> dict[str, int]:
    """Counts equal on both sides (raises StoreError naming the first difference)."""
    from memory_core.db import pg_fts
    from memory_core.vectors import vec_table

    pg_fts.flush(dst)  # the postings of the copied rows, before they are compared
    mine, theirs = _counts(src), _counts(dst)
    for name, n in mine.items():
        if theirs.get(name) != n:
            raise StoreError(f"promote check failed: {name} has {n} rows in the state db and "
                             f"{theirs.get(name)} in the primary; nothing was switched")
    gen = dst.execute("SELECT value FROM meta WHERE key = 'vector_generation'").fetchone()
    for base, n in vectors.items():
        got = dst.execute(f"SELECT count(*) FROM {vec_table(base, int(gen[0]))}").fetchone()[0]
        if got != n:
            raise StoreError(f"promote check failed: {n} {base} vectors in the state db, "
                             f"{got} in the primary; nothing was switched")
    if _fts_stats(src) != _fts_stats(dst):
        raise StoreError("promote check failed: the primary's full-text statistics differ "
                         "from the state db's; nothing was switched")
    return mine


def promote(settings: Settings, *, dry_run: bool = False,
            progress: Progress | None = None) -> PromoteReport:
    """Switch the memory of ``settings`` (SQLite backend) to the Postgres primary (see the
    module). Raises ConfigurationError (a refusal, with the fix) or StoreError."""
    from memory_core.db.pg_store import PgDatabase
    from memory_core.db.stores import open_state

    say = progress or (lambda _: None)
    if settings.state_backend != "sqlite":
        raise ConfigurationError("run `mnemo mirror promote` with MNEMO_STATE_BACKEND=sqlite "
                                 "(it copies the SQLite memory into the primary)")
    url = settings.postgres_backend
    if url is None:
        raise ConfigurationError("promote needs MNEMO_POSTGRES_URL (the primary to switch to)")
    state = open_state(settings)
    report = PromoteReport(url.canonical, dry_run)
    try:
        if get_meta(state.conn, "reindex_target") is not None:
            raise ConfigurationError("refusing to promote while a vector reindex is under "
                                     "way: finish it with `mnemo memory reindex` first")
        report.mirrors_checked = _check_drift(settings, state, say)
        target = PgDatabase(url, settings.postgres_password)
        try:
            target.migrate()
            report.rows = _counts(state.conn)
            _refuse_occupied(target, str(settings.state_db_path))
            if dry_run:
                return report
            report.vectors = _copy(state, target, str(settings.state_db_path), say)
            target.vacuum_analyze()
            say("vacuumed and analysed the primary (planner statistics, visibility map)")
        finally:
            target.close()
        with atomic(state.conn):
            set_meta(state.conn, primary.PROMOTED_TO, url.canonical)
        report.promoted = True
        say("promoted: set MNEMO_STATE_BACKEND=postgres for every process of this memory")
        return report
    finally:
        state.close()


def _refuse_occupied(target: Any, source: str) -> None:
    conn = target.conn
    came = get_meta(conn, primary.PROMOTED_FROM)
    tenants = conn.execute("SELECT count(*) FROM tenants").fetchone()[0]
    if tenants and came != source:
        raise ConfigurationError(
            f"refusing to promote: the primary at {target.url.canonical} already holds a "
            f"memory ({tenants} tenants{', from ' + came if came else ''}); use another "
            "database, or drop its schema mnemo_primary to start over")


def _copy(state: Any, target: Any, source: str, say: Progress) -> dict[str, int]:
    src, dst = state.conn, target.conn
    src.execute("BEGIN")  # one snapshot of the file for the whole copy
    try:
        dst.execute("BEGIN IMMEDIATE")
        try:
            # A rerun after a crash between the two marks: the same file, copied again.
            tables = [t.name for t in schema_state.metadata.sorted_tables
                      if t.name not in ("schema_migrations", "meta")] + pg_fts.index_tables()
            dst.raw.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
            dst.raw.execute("DELETE FROM meta WHERE key NOT IN ('kind', 'vector_type')")
            for name in pg_vectors.table_names(dst, ""):
                if "_vec_g" in name:
                    dst.raw.execute(f"DROP TABLE {name}")
            with pg_fts.bulk_load(dst):  # the postings' indexes built once, at the end
                _copy_tables(src, dst.raw, say)
                vectors = _copy_meta_and_vectors(src, dst)
                pg_fts.flush(dst)  # the postings of the copied rows
                say("indexed the copied rows' full text")
            _verify(src, dst, vectors)
            dst.raw.execute("INSERT INTO meta (key, value) VALUES (%s, %s), (%s, %s)",
                            (primary.PROMOTED_FROM, source, "promoted_at", to_db(utcnow())))
            dst.execute("COMMIT")
        except BaseException:
            dst.raw.execute("ROLLBACK")
            raise
    finally:
        src.execute("ROLLBACK")
    return vectors

