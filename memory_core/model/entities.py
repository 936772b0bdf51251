"""Entities: stable canonical ids resolved from labels through ``entity_aliases``.

- A minted id is a digest of (tenant, normalised label), so the same label mints the same id
  whatever order turns arrive in. The display name is the first surface form seen.
- Each tenant has the hub ``user`` (made with the tenant, in ``tenants``). Self-labels
  ("user", "you", "I", "me", the user's own name once known) resolve to it.
- A rename keeps the id: the new label becomes the name and an alias, the old one stays an
  alias (so old nicknames still resolve), and belief texts are re-rendered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from memory_core.db.entity_kinds import THING
from memory_core.db.sqlite import Connection
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.model.belief_rules import normalize_object, render_text
from memory_core.model.hygiene import SELF_LABELS, check_subject, normalize_label
from memory_core.model.tenants import HUB, require_tenant
from memory_core.model.write_tx import Embeds, WriteTx, write_tx
from memory_core.vectors import VectorIndex

MAX_NAME_CHARS = 200


def mint_id(tenant: str, norm: str) -> str:
    digest = hashlib.sha256(f"entity\x1f{tenant}\x1f{norm}".encode()).hexdigest()
    return "ent_" + digest[:20]


def lookup(conn: Connection, tenant: str, label: str) -> str | None:
    """The entity a label names now, or None. Self-labels name the hub."""
    norm = normalize_label(label)
    if norm in SELF_LABELS:
        return HUB
    row = conn.execute("SELECT entity_id FROM entity_aliases WHERE tenant = ? AND alias_norm = ?",
                       (tenant, norm)).fetchone()
    return row[0] if row else None


def entity_name(conn: Connection, tenant: str, entity_id: str) -> str:
    row = conn.execute("SELECT name FROM entities WHERE tenant = ? AND entity_id = ?",
                       (tenant, entity_id)).fetchone()
    if row is None:
        raise NotFoundError(f"entity {entity_id!r} does not exist in tenant {tenant!r}: "
                            "list entities with `mnemo entities list`")
    return row[0]


def display_name(conn: Connection, tenant: str, label: str) -> str:
    """The name a label would render with (an existing entity's, else the label itself)."""
    entity_id = lookup(conn, tenant, label)
    if entity_id is None:
        return " ".join(label.split())
    return entity_name(conn, tenant, entity_id)


def classify(tx: WriteTx, entity_id: str | None, kind: str | None) -> None:
    """Give an entity still a ``thing`` the ``kind`` a belief's role says it is
    (``db.entity_kinds``); a kind set before is kept. Idempotent; a change goes to the
    mirrors' outbox."""
    if entity_id is None or kind is None:
        return
    cur = tx.conn.execute(
        "UPDATE entities SET kind = ?, updated_at = ? WHERE tenant = ? AND entity_id = ? AND "
        "kind = ?", (kind, tx.now, tx.tenant, entity_id, THING))
    if cur.rowcount:
        tx.change("entity", entity_id)


def resolve(tx: WriteTx, label: str, kind: str = THING) -> str:
    """The entity id for ``label``, minting it when unknown. Check hygiene first."""
    found = lookup(tx.conn, tx.tenant, label)
    if found is not None:
        return found
    norm = normalize_label(label)
    name = " ".join(label.split())
    entity_id = mint_id(tx.tenant, norm)
    cur = tx.conn.execute(
        "INSERT OR IGNORE INTO entities (tenant, entity_id, name, kind, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?)", (tx.tenant, entity_id, name, kind, tx.now, tx.now))
    tx.conn.execute(
        "INSERT OR IGNORE INTO entity_aliases (tenant, alias_norm, entity_id, label, created_at) "
        "VALUES (?, ?, ?, ?, ?)", (tx.tenant, norm, entity_id, name, tx.now))
    if cur.rowcount:
        tx.change("entity", entity_id)
        tx.act("entity_minted")
    return entity_id


def add_alias(tx: WriteTx, entity_id: str, label: str) -> str | None:
    """Point ``label`` at ``entity_id``. Returns the entity it named before, if another."""
    norm = normalize_label(label)
    before = lookup(tx.conn, tx.tenant, label)
    if before == entity_id or norm in SELF_LABELS:
        return None
    tx.conn.execute(
        "INSERT INTO entity_aliases (tenant, alias_norm, entity_id, label, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, alias_norm) DO UPDATE SET "
        "entity_id = excluded.entity_id, label = excluded.label",
        (tx.tenant, norm, entity_id, " ".join(label.split()), tx.now))
    return before


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise InvalidInputError(
            f"an entity name must be non-empty text of at most {MAX_NAME_CHARS} characters")
    reason = check_subject(name)
    if reason is not None:
        raise InvalidInputError(f"{name[:40]!r} cannot name an entity ({reason}): use a "
                                "proper name such as 'ShipX' or 'Aunt Mary'")
    return " ".join(name.split())


def set_name(tx: WriteTx, entity_id: str, new_name: str) -> bool:
    """Rename inside a transaction and re-render the texts that carry the name."""
    old = entity_name(tx.conn, tx.tenant, entity_id)
    if old == new_name:
        return False
    owner = lookup(tx.conn, tx.tenant, new_name)
    if owner is not None and owner != entity_id:
        raise InvalidInputError(
            f"{new_name!r} already names entity {owner!r}: merge the two entities instead "
            "of renaming")
    add_alias(tx, entity_id, old)
    add_alias(tx, entity_id, new_name)
    tx.conn.execute("UPDATE entities SET name = ?, updated_at = ? WHERE tenant = ? AND "
                    "entity_id = ?", (new_name, tx.now, tx.tenant, entity_id))
    rerender(tx, entity_id)
    tx.change("entity", entity_id)
    tx.act("entity_renamed")
    return True


def rerender(tx: WriteTx, entity_id: str) -> int:
    """Re-render the texts of beliefs about ``entity_id``, and, unless it is the hub, of
    those whose object it is (its ego anchor, ``user has_sibling Anna``): their object
    takes the new name, so the old one no longer stands as a value of its own (a later
    "my sister Ann" would have been a second sibling beside "Anna")."""
    conn, tenant = tx.conn, tx.tenant
    name = entity_name(conn, tenant, entity_id)
    rows = conn.execute(
        "SELECT id, belief_uid, subject_id, predicate, object_text, text, negated FROM beliefs "
        "WHERE tenant = ? AND (subject_id = ? OR object_entity_id = ?)",
        (tenant, entity_id, entity_id if entity_id != HUB else None)).fetchall()
    changed = 0
    for row_id, uid, subject_id, predicate, object_text, text, negated in rows:
        if subject_id != entity_id:  # found by its object
            object_text = name
        subject_name = name if subject_id == entity_id else entity_name(conn, tenant,
                                                                         subject_id)
        new_text = render_text(subject_name, predicate, object_text, bool(negated))
        if new_text != text:
            conn.execute("UPDATE beliefs SET object_text = ?, object_norm = ?, text = ? "
                         "WHERE id = ?", (object_text, normalize_object(object_text),
                                          new_text, row_id))
            tx.vector("beliefs", row_id, new_text)
            tx.change("belief", uid)
            changed += 1
    return changed


@dataclass(frozen=True)
class RenameResult:
    tenant: str
    entity_id: str
    old_name: str
    new_name: str
    beliefs_rerendered: int


def rename_entity(conn: Connection, index: VectorIndex, tenant: str, entity_id: str,
                  new_name: str) -> RenameResult:
    """Give ``entity_id`` a new display name; the id stays, the old name becomes an alias.

    Raises NotFoundError for an unknown entity, InvalidInputError for a bad name or one that
    already names another entity (merge instead).
    """
    require_tenant(conn, tenant)
    new_name = check_name(new_name)
    old_name = entity_name(conn, tenant, entity_id)
    embeds = Embeds(index)
    embeds.prepare(_texts_after_rename(conn, tenant, entity_id, new_name))
    with write_tx(conn, index, tenant, embeds) as tx:
        set_name(tx, entity_id, new_name)
        n = len(tx.vec_upserts["beliefs"])
    return RenameResult(tenant, entity_id, old_name, new_name, n)


def _texts_after_rename(conn: Connection, tenant: str, entity_id: str, new_name: str) -> list[str]:
    """The belief texts ``rerender`` will write, to embed before the transaction."""
    rows = conn.execute(
        "SELECT subject_id, predicate, object_text, negated FROM beliefs WHERE tenant = ? AND "
        "(subject_id = ? OR object_entity_id = ?)", (tenant, entity_id, entity_id)).fetchall()
    texts = []
    for subject_id, predicate, object_text, negated in rows:
        if subject_id == entity_id:
            texts.append(render_text(new_name, predicate, object_text, bool(negated)))
        else:
            texts.append(render_text(entity_name(conn, tenant, subject_id), predicate,
                                     new_name, bool(negated)))
    return texts
