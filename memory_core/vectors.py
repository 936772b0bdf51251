"""Dense vectors in sqlite-vec, and the embedder mismatch guard.

The state db records which embedder identity built its vectors (``meta``). Vectors live in
one vec0 table per base table and *generation*: ``episodes_vec_g1``, ``beliefs_vec_g1``. When
the active embedder differs from the recorded one, dense search and vector writes are off
(vectors are never mixed) until ``reindex`` builds the next generation with the active
embedder and flips the record in one transaction. A killed reindex resumes where it stopped:
each batch commits its vectors together with its cursor.

A worker refuses to start on data recorded for another embedder (``claim``): it would store
rows without vectors. Rows that lack a vector all the same (a crash of an older version, a
worker of another embedder) are counted by ``missing`` and filled by ``reindex``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory_core.db import changes, pg_vectors
from memory_core.db.dialect import is_postgres
from memory_core.db.meta import get_meta, get_metas, set_meta
from memory_core.db.schema_state import VECTOR_BASES
from memory_core.db.sqlite import Connection, atomic
from memory_core.embedders.base import Embedder
from memory_core.embedders.identity import mismatch_message
from memory_core.errors import EmbedderMismatchError

_IDENTITY = "embedder_identity"
_DIM = "embedder_dim"
GENERATION_KEY = _GENERATION = "vector_generation"  # meta key of the active generation
_TARGET = "reindex_target"  # JSON {identity, dim, generation} while a reindex is under way


def vec_table(base: str, generation: int) -> str:
    if base not in VECTOR_BASES:
        raise ValueError(f"no vectors for table {base!r}")
    return f"{base}_vec_g{int(generation)}"


def _create_tables(conn: Connection, generation: int, dim: int) -> None:
    if is_postgres(conn):
        for base in VECTOR_BASES:
            pg_vectors.create_table(conn, vec_table(base, generation), dim)
        return
    for base in VECTOR_BASES:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {vec_table(base, generation)} USING vec0("
            f"tenant text partition key, embedding float[{int(dim)}] distance_metric=cosine)"
        )


@dataclass(frozen=True)
class IndexState:
    """What the state db records against what the process would write."""

    recorded_identity: str | None
    recorded_dim: int | None
    generation: int | None
    active_identity: str
    active_dim: int
    reindex_target: dict[str, Any] | None

    @property
    def match(self) -> bool:
        return self.recorded_identity == self.active_identity

    @property
    def dense_enabled(self) -> bool:
        return self.match and self.generation is not None


@dataclass(frozen=True)
class ReindexReport:
    """``embedded``: rows re-embedded into a new generation; ``filled``: rows of the current
    generation that had no vector; ``already_current``: the embedder already matched."""

    generation: int
    embedded: dict[str, int]
    already_current: bool
    filled: dict[str, int]

    @property
    def nothing_to_do(self) -> bool:
        return self.already_current and not any(self.filled.values())


class VectorIndex:
    """Vector reads and writes for one embedder against the state db.

    Writes happen inside the caller's transaction; embed first, outside it.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def state(self, conn: Connection) -> IndexState:
        meta = get_metas(conn, _DIM, _GENERATION, _TARGET, _IDENTITY)
        dim, gen, target = meta.get(_DIM), meta.get(_GENERATION), meta.get(_TARGET)
        return IndexState(
            recorded_identity=meta.get(_IDENTITY),
            recorded_dim=int(dim) if dim else None,
            generation=int(gen) if gen else None,
            active_identity=self.embedder.identity,
            active_dim=self.embedder.dim,
            reindex_target=json.loads(target) if target else None,
        )

    def ensure(self, conn: Connection) -> IndexState:
        """Record the active embedder on a database that has none yet (idempotent). A
        database that has one is only read: no write transaction (on the Postgres primary a
        store-wide one would hold back every tenant's writers)."""
        state = self.state(conn)
        if state.recorded_identity is not None:
            return state
        with atomic(conn):
            if get_meta(conn, _IDENTITY) is None:
                set_meta(conn, _IDENTITY, self.embedder.identity)
                set_meta(conn, _DIM, str(self.embedder.dim))
                set_meta(conn, _GENERATION, "1")
                _create_tables(conn, 1, self.embedder.dim)
        return self.state(conn)

    def claim(self, conn: Connection, where: str) -> IndexState:
        """Record the active embedder on a fresh database, or check that it is the recorded
        one; ``where`` names the database in the error.

        Raises:
            EmbedderMismatchError: the data was embedded by another embedder (both named,
                with the two ways to fix it).
        """
        state = self.ensure(conn)
        if not state.match:
            raise EmbedderMismatchError(mismatch_message(
                state.recorded_identity or "", state.active_identity, where))
        return state

    def dense_enabled(self, conn: Connection) -> bool:
        return get_meta(conn, _IDENTITY) == self.embedder.identity

    def active_tables(self, conn: Connection) -> dict[str, str]:
        """base -> the vector table dense search reads (empty while dense is off): one
        statement."""
        meta = get_metas(conn, _IDENTITY, _GENERATION)
        if meta.get(_IDENTITY) != self.embedder.identity:
            return {}
        gen = int(meta.get(_GENERATION) or 1)
        return {base: vec_table(base, gen) for base in VECTOR_BASES}

    def _active_table(self, conn: Connection, base: str) -> str | None:
        if not self.dense_enabled(conn):
            return None
        return vec_table(base, int(get_meta(conn, _GENERATION) or 1))

    def _write_tables(self, conn: Connection, base: str) -> list[str]:
        """The active generation when it matches, plus a generation being built for us."""
        meta = get_metas(conn, _IDENTITY, _GENERATION, _TARGET)
        tables = []
        if meta.get(_IDENTITY) == self.embedder.identity:
            tables.append(vec_table(base, int(meta.get(_GENERATION) or 1)))
        target = meta.get(_TARGET)
        if target and json.loads(target)["identity"] == self.embedder.identity:
            tables.append(vec_table(base, json.loads(target)["generation"]))
        return tables

    def upsert(self, conn: Connection, base: str,
               items: Sequence[tuple[int, str, np.ndarray]]) -> int:
        """Write ``(rowid, tenant, vector)`` items; a no-op (0) while dense is off.

        Idempotent: an existing vector for the rowid is replaced.
        """
        tables = self._write_tables(conn, base)
        if not tables or not items:
            return 0
        rows = [(i, t, _blob(v, conn)) for i, t, v in items]
        with atomic(conn):
            for table in tables:
                if is_postgres(conn):  # one statement per row instead of two
                    conn.executemany(pg_vectors.upsert_sql(table), rows)
                    continue
                conn.executemany(f"DELETE FROM {table} WHERE rowid = ?",
                                 [(i,) for i, _, _ in items])
                conn.executemany(
                    f"INSERT INTO {table} (rowid, tenant, embedding) VALUES (?, ?, ?)", rows)
            if not is_postgres(conn):  # for the processes holding them (recall.resident)
                changes.log_rows(conn, base, [(i, t) for i, t, _ in items])
        return len(items)

    def delete(self, conn: Connection, base: str, rowids: Sequence[int]) -> int:
        """Delete the vectors of ``rowids`` from every generation; return how many remain."""
        tables = _vec_tables(conn, base)
        if is_postgres(conn):
            _delete_rows(conn, tables, rowids)
        else:
            with atomic(conn):  # logged for the processes holding them (recall.resident)
                for part in range(0, len(rowids), 500):  # a row deleted already was logged
                    ids = [int(i) for i in rowids[part:part + 500]]
                    changes.log_rows(conn, base, conn.execute(
                        f"SELECT id, tenant FROM {base} WHERE id IN ({','.join('?' * len(ids))})",
                        ids).fetchall())
                _delete_rows(conn, tables, rowids)
        # Point lookups: vec0 answers "rowid IN (...)" by scanning the whole table.
        return sum(conn.execute(f"SELECT 1 FROM {t} WHERE rowid = ?", (i,)).fetchone()
                   is not None for t in tables for i in rowids)

    def search(self, conn: Connection, base: str, tenant: str, vector: np.ndarray,
               k: int) -> list[tuple[int, float]]:
        """Nearest ``k`` rowids of ``tenant`` by cosine distance; [] while dense is off."""
        table = self._active_table(conn, base)
        if table is None:
            return []
        if is_postgres(conn):
            return pg_vectors.search(conn, table, tenant, vector, k)
        rows = conn.execute(
            f"SELECT rowid, distance FROM {table} WHERE embedding MATCH ? AND k = ? "
            "AND tenant = ? ORDER BY distance",
            (_blob(vector), int(k), tenant),
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def without_vector(self, conn: Connection, base: str, rowids: Sequence[int]) -> list[int]:
        """Which of ``rowids`` have no vector in the active generation; [] while dense is off
        (nothing is written then). Point lookups: vec0 scans the whole table for ``IN`` and
        ranges, but finds one rowid through its index."""
        table = self._active_table(conn, base)
        if table is None:
            return []
        sql = f"SELECT 1 FROM {table} WHERE rowid = ?"
        return [i for i in rowids if conn.execute(sql, (i,)).fetchone() is None]

    def counts(self, conn: Connection) -> dict[str, int]:
        """Vectors in the active generation per base table (0 when there is none)."""
        gen = get_meta(conn, _GENERATION)
        out = {}
        for base in VECTOR_BASES:
            table = vec_table(base, int(gen)) if gen else None
            out[base] = _count(conn, table) if table and _exists(conn, table) else 0
        return out

    def missing(self, conn: Connection) -> dict[str, int] | None:
        """How many rows per base table have no vector in the recorded generation (None: no
        index); ``without_vector`` says which of some rows."""
        gen = get_meta(conn, _GENERATION)
        if gen is None:
            return None
        return {base: int(conn.execute(
                    f"SELECT count(*) {_missing_sql(base, vec_table(base, int(gen)))}"
                ).fetchone()[0]) for base in VECTOR_BASES}

    def reindex(self, conn: Connection, *, batch_size: int = 256,
                progress: Callable[[str, int, int], None] | None = None) -> ReindexReport:
        """Re-embed every row with the active embedder into a new generation, then flip;
        on a matching index, embed only the rows that have no vector.

        Idempotent (a complete current index is left alone) and resumable (a killed run
        continues with the same target, and filled rows stay filled). Rows written while it
        runs are picked up before the flip.
        """
        state = self.state(conn)
        if state.match and state.generation is not None:
            with atomic(conn):  # a reindex for another embedder is abandoned
                conn.execute("DELETE FROM meta WHERE key = ? OR key LIKE 'reindex_cursor:%'",
                             (_TARGET,))
            _drop_stale(conn, state.generation)
            filled = {base: self._fill_missing(conn, base, state.generation, batch_size,
                                               progress) for base in VECTOR_BASES}
            return ReindexReport(state.generation, {}, already_current=True, filled=filled)
        target = self._begin_target(conn, state)
        gen = target["generation"]
        embedded = {base: 0 for base in VECTOR_BASES}
        while True:
            for base in VECTOR_BASES:
                embedded[base] += self._fill(conn, base, gen, batch_size, progress)
            with atomic(conn):
                if any(_pending(conn, base, gen) for base in VECTOR_BASES):
                    continue  # new rows arrived while filling; fill them first
                set_meta(conn, _IDENTITY, target["identity"])
                set_meta(conn, _DIM, str(target["dim"]))
                set_meta(conn, _GENERATION, str(gen))
                conn.execute("DELETE FROM meta WHERE key = ? OR key LIKE 'reindex_cursor:%'",
                             (_TARGET,))
            break
        _drop_stale(conn, gen)
        return ReindexReport(gen, embedded, already_current=False,
                             filled={base: 0 for base in VECTOR_BASES})

    def _begin_target(self, conn: Connection, state: IndexState) -> dict[str, Any]:
        with atomic(conn):
            target = state.reindex_target
            if target is None or target["identity"] != state.active_identity:
                gen = max([*_generations(conn), state.generation or 0]) + 1
                target = {"identity": state.active_identity, "dim": state.active_dim,
                          "generation": gen}
                set_meta(conn, _TARGET, json.dumps(target))
                conn.execute("DELETE FROM meta WHERE key LIKE 'reindex_cursor:%'")
            _create_tables(conn, target["generation"], target["dim"])
        return target

    def _fill(self, conn: Connection, base: str, gen: int, batch_size: int,
              progress: Callable[[str, int, int], None] | None) -> int:
        table = vec_table(base, gen)
        total = conn.execute(f"SELECT count(*) FROM {base}").fetchone()[0]
        done = 0
        while True:
            cursor = int(get_meta(conn, f"reindex_cursor:{base}") or 0)
            rows = conn.execute(
                f"SELECT id, tenant, text FROM {base} WHERE id > ? ORDER BY id LIMIT ?",
                (cursor, batch_size),
            ).fetchall()
            if not rows:
                return done
            vectors = self.embedder.embed([r[2] for r in rows])  # outside the transaction
            with atomic(conn):
                conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r[0],) for r in rows])
                conn.executemany(
                    f"INSERT INTO {table} (rowid, tenant, embedding) VALUES (?, ?, ?)",
                    [(r[0], r[1], _blob(v, conn)) for r, v in zip(rows, vectors, strict=True)],
                )
                set_meta(conn, f"reindex_cursor:{base}", str(rows[-1][0]))
            done += len(rows)
            if progress:
                progress(base, _count(conn, table), total)


    def _fill_missing(self, conn: Connection, base: str, gen: int, batch_size: int,
                      progress: Callable[[str, int, int], None] | None) -> int:
        """Embed the rows of ``base`` that have no vector in generation ``gen``."""
        table = vec_table(base, gen)
        missing_sql = _missing_sql(base, table)
        total = int(conn.execute(f"SELECT count(*) {missing_sql}").fetchone()[0])
        done, after = 0, 0
        while done < total:
            rows = conn.execute(f"SELECT b.id, b.tenant, b.text {missing_sql} AND b.id > ? "
                                "ORDER BY b.id LIMIT ?", (after, batch_size)).fetchall()
            if not rows:
                break
            after = rows[-1][0]
            vectors = self.embedder.embed([r[2] for r in rows])  # outside the transaction
            with atomic(conn):
                # A writer may have stored or changed a row since it was read: leave it.
                items = [(r[0], r[1], _blob(v, conn)) for r, v in zip(rows, vectors, strict=True)
                         if _still_missing(conn, base, table, r[0], r[2])]
                conn.executemany(
                    f"INSERT INTO {table} (rowid, tenant, embedding) VALUES (?, ?, ?)", items)
                if not is_postgres(conn):
                    changes.log_rows(conn, base, [(i, t) for i, t, _ in items])
            done += len(rows)
            if progress:
                progress(base, done, total)
        return done


def _delete_rows(conn: Connection, tables: Sequence[str], rowids: Sequence[int]) -> None:
    for table in tables:
        conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(i,) for i in rowids])


def _missing_sql(base: str, table: str) -> str:
    """The rows of ``base`` with no vector in ``table``, as a FROM clause (alias ``b``)."""
    return f"FROM {base} b WHERE NOT EXISTS (SELECT 1 FROM {table} v WHERE v.rowid = b.id)"


def _still_missing(conn: Connection, base: str, table: str, rowid: int, text: str) -> bool:
    row = conn.execute(f"SELECT text FROM {base} WHERE id = ?", (rowid,)).fetchone()
    return row is not None and row[0] == text and conn.execute(
        f"SELECT 1 FROM {table} WHERE rowid = ?", (rowid,)).fetchone() is None


def _blob(vector: np.ndarray, conn: Connection | None = None) -> Any:
    """A vector as the engine's vector table takes it (sqlite-vec: float32 bytes)."""
    if conn is not None and is_postgres(conn):
        return pg_vectors.param(conn, vector)
    return np.asarray(vector, dtype=np.float32).tobytes()


def stored_vector(value: Any) -> np.ndarray:
    """A vector as a vector table returned it (sqlite-vec bytes, pgvector text, real[])."""
    if isinstance(value, bytes | bytearray | memoryview):
        return np.frombuffer(value, dtype=np.float32)
    if isinstance(value, str):
        return np.array(value.strip("[]").split(","), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)


def _exists(conn: Connection, table: str) -> bool:
    if is_postgres(conn):
        return pg_vectors.table_exists(conn, table)
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (table,)).fetchone() is not None


def _count(conn: Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _pending(conn: Connection, base: str, gen: int) -> bool:
    cursor = int(get_meta(conn, f"reindex_cursor:{base}") or 0)
    return conn.execute(f"SELECT 1 FROM {base} WHERE id > ? LIMIT 1", (cursor,)).fetchone() \
        is not None


def _generations(conn: Connection) -> list[int]:
    gens = set()
    for base in VECTOR_BASES:
        if is_postgres(conn):
            names = pg_vectors.table_names(conn, f"{base}_vec_g")
            gens |= {int(n[len(base) + 6:]) for n in names if n[len(base) + 6:].isdigit()}
            continue
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                    "AND name GLOB ?", (f"{base}_vec_g[0-9]*",)):
            suffix = name[len(base) + 6:]
            if suffix.isdigit():
                gens.add(int(suffix))
    return sorted(gens)


def _vec_tables(conn: Connection, base: str) -> list[str]:
    return [vec_table(base, g) for g in _generations(conn) if _exists(conn, vec_table(base, g))]


def _drop_stale(conn: Connection, keep: int) -> None:
    """Drop vector tables of every generation but ``keep``."""
    for gen in _generations(conn):
        if gen == keep:
            continue
        with atomic(conn):
            for base in VECTOR_BASES:
                conn.execute(f"DROP TABLE IF EXISTS {vec_table(base, gen)}")
