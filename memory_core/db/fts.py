"""Tenant-scoped full-text indexes: what a tenant's keyword search sees is its own rows only.

One FTS5 index per text table (``turns_fts``, ``episodes_fts``, ``beliefs_fts``), shared by
every tenant, but each indexed token is written in its tenant's namespace: the tenant's
prefix (``tenant_prefix``: 16 characters of a sha256 of the tenant) followed by the stemmed
word. So a term's doclist holds that tenant's rows and nobody else's, a search walks only
them, and a term's document frequency is the tenant's. The tokens are made here, in Python
(``tokens``: NFKD, diacritics dropped, case-folded, split on anything that is not a letter or
digit, Snowball English stems), and the FTS5 ``ascii`` tokenizer only splits them on the
spaces between them: what is indexed is exactly what ``tokens`` made, so a search can look a
term up by name (``fts5vocab``) as well as ``MATCH`` it.

The index is contentless (``contentless_delete=1``: a row is deleted by its rowid), kept in
step with its base table by triggers that call ``mnemo_fts_text`` (registered on every
connection by ``db.sqlite.connect``; a writer without it is refused by SQLite, never left
out of step). The same triggers keep ``fts_stats``: rows and tokens of each tenant in each
table, the N and average length of the tenant's own bm25 (``recall.search``).
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from py_rust_stemmers import SnowballStemmer

from memory_core.db.meta import get_meta, set_meta

FTS_TABLES: dict[str, str] = {
    # fts table -> base table (column "text", rowid "id")
    "turns_fts": "turns",
    "episodes_fts": "episodes",
    "beliefs_fts": "beliefs",
}

__all__ = ["FTS_TABLES", "ddl", "fill", "index_text", "match", "register", "search_tokens",
           "tokens"]

# Bumped whenever ``tokens`` would make other tokens for the same text: the drift check
# rebuilds every index whose recorded version differs.
TOKENS_VERSION = "1:nfkd-casefold-alnum-snowball-english"
META_KEY = "fts_tokens"
PREFIX_CHARS = 16
_TOKEN_RE = re.compile(r"[^\W_]+")
_STEMMER = SnowballStemmer("english")
TEXT_FUNCTION = "mnemo_fts_text"
LENGTH_FUNCTION = "mnemo_fts_len"


@functools.lru_cache(maxsize=65_536)
def tenant_prefix(tenant: str) -> str:
    """The namespace of ``tenant``'s tokens: letters and digits only, fixed length."""
    return "t" + hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()[
        : PREFIX_CHARS - 1]


_STEMS: dict[str, str] = {}  # word -> stem: most words of a chat are common ones
_MAX_STEMS = 200_000


def _stems(words: list[str]) -> tuple[str, ...]:
    """Stems of ``words``, through the shared cache (another thread may clear it meanwhile:
    what this call stemmed is kept aside)."""
    stems = _STEMS
    missing = [w for w in words if w not in stems]
    if not missing:
        try:
            return tuple([stems[w] for w in words])
        except KeyError:  # cleared by another thread just now
            missing = words
    new = dict(zip(missing, _STEMMER.stem_words(missing), strict=True))
    if len(stems) > _MAX_STEMS:
        stems.clear()
    stems.update(new)
    return tuple([new[w] if w in new else stems.get(w) or _STEMMER.stem_word(w)
                  for w in words])


@functools.lru_cache(maxsize=4_096)
def tokens(text: str) -> tuple[str, ...]:
    """The stemmed words of ``text``, in order (repeats kept: they are term frequencies)."""
    folded = text.casefold()
    if not folded.isascii():
        folded = "".join(c for c in unicodedata.normalize("NFKD", folded)
                         if not unicodedata.combining(c))
    return _stems(_TOKEN_RE.findall(folded))


def index_text(tenant: str, text: str) -> str:
    """What the index holds for one row: its tokens in the tenant's namespace."""
    prefix = tenant_prefix(tenant)
    return " ".join([prefix + t for t in tokens(text)])


def token_count(text: str) -> int:
    return len(tokens(text))


def search_tokens(tenant: str, terms: Iterable[str]) -> tuple[str, ...]:
    """The indexed tokens a search for ``terms`` looks up, without repeats, in order."""
    prefix = tenant_prefix(tenant)
    out: dict[str, None] = {}
    for term in terms:
        for t in tokens(term):
            out.setdefault(prefix + t, None)
    return tuple(out)


def match(tenant: str, *words: str) -> str:
    """An FTS5 ``MATCH`` expression for any of ``words`` among ``tenant``'s rows (for
    operators and tests; recall ranks through ``recall.keyword``)."""
    return " OR ".join(f'"{t}"' for t in search_tokens(tenant, words)) or '""'


def _sql_text(tenant: Any, text: Any) -> str:
    return index_text(str(tenant), str(text or ""))


def _sql_len(text: Any) -> int:
    return token_count(str(text or ""))


def register(conn: Any) -> None:
    """Make the triggers' functions available on ``conn`` (every connection has them)."""
    conn.create_function(TEXT_FUNCTION, 2, _sql_text, deterministic=True)
    conn.create_function(LENGTH_FUNCTION, 1, _sql_len, deterministic=True)


def ddl(fts: str, base: str) -> list[str]:
    """The index, its vocabulary views and the triggers keeping it and ``fts_stats`` in step
    with ``base`` (a row's tenant never changes)."""
    add_stats = (f"INSERT INTO fts_stats (tbl, tenant, rows, tokens) VALUES ('{base}', "
                 f"new.tenant, 1, {LENGTH_FUNCTION}(new.text)) ON CONFLICT (tbl, tenant) DO "
                 "UPDATE SET rows = rows + 1, tokens = tokens + excluded.tokens;")
    return [
        f"CREATE VIRTUAL TABLE {fts} USING fts5(text, content='', contentless_delete=1, "
        "tokenize='ascii')",
        f"CREATE VIRTUAL TABLE {fts}_v USING fts5vocab({fts}, 'row')",
        f"CREATE VIRTUAL TABLE {fts}_i USING fts5vocab({fts}, 'instance')",
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {base} BEGIN "
        f"INSERT INTO {fts}(rowid, text) VALUES (new.id, {TEXT_FUNCTION}(new.tenant, new.text)); "
        f"{add_stats} END",
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {base} BEGIN "
        f"DELETE FROM {fts} WHERE rowid = old.id; "
        f"UPDATE fts_stats SET rows = rows - 1, tokens = tokens - {LENGTH_FUNCTION}(old.text) "
        f"WHERE tbl = '{base}' AND tenant = old.tenant; END",
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF text ON {base} BEGIN "
        f"DELETE FROM {fts} WHERE rowid = old.id; "
        f"INSERT INTO {fts}(rowid, text) VALUES (new.id, {TEXT_FUNCTION}(new.tenant, new.text)); "
        f"UPDATE fts_stats SET tokens = tokens - {LENGTH_FUNCTION}(old.text) + "
        f"{LENGTH_FUNCTION}(new.text) WHERE tbl = '{base}' AND tenant = old.tenant; END",
    ]


def fill(conn: Any, fts: str, base: str) -> None:
    """Index every row of ``base`` from scratch, and its ``fts_stats`` (inside the caller's
    transaction: a migration, or the drift check's repair)."""
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('delete-all')")
    conn.execute("DELETE FROM fts_stats WHERE tbl = ?", (base,))
    conn.execute(f"INSERT INTO {fts}(rowid, text) SELECT id, {TEXT_FUNCTION}(tenant, text) "
                 f"FROM {base}")
    conn.execute(f"INSERT INTO fts_stats (tbl, tenant, rows, tokens) SELECT '{base}', tenant, "
                 f"count(*), coalesce(sum({LENGTH_FUNCTION}(text)), 0) FROM {base} "
                 "GROUP BY tenant")


def record_version(conn: Any) -> None:
    set_meta(conn, META_KEY, TOKENS_VERSION)


def recorded_version(conn: Any) -> str | None:
    return get_meta(conn, META_KEY)


def tenant_stats(conn: Any, base: str, tenant: str) -> tuple[int, int]:
    """(rows, tokens) of ``tenant`` in ``base``'s index."""
    row = conn.execute("SELECT rows, tokens FROM fts_stats WHERE tbl = ? AND tenant = ?",
                       (base, tenant)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def doc_length(blob: bytes | None) -> int:
    """The token count in an FTS5 ``_docsize`` value (one column: one SQLite varint)."""
    if not blob:
        return 0
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value
