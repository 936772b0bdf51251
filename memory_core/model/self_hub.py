"""The hub's own name: the user's name collapses onto the hub ``user``.

Every name the user has given for themselves (a ``name_is`` belief of the hub that is not
invalidated) becomes a hub alias, so later statements about "Mubder" land on the hub. An
entity minted earlier under that name (a person shell) is merged into the hub. The hub's
display name is the currently active ``name_is`` value. All of it is a function of the
beliefs, so arrival order does not change the outcome.

A deleted name (``forget_hub_names``, from verified deletion) leaves nothing that names the
user by it: the hub's alias and display name, the beliefs whose object is the user under
that name (``Tom friend_of Maya``: re-rendered with the hub's name now), an entity named
for the user by it (``Maya's sister``: renamed ``user's sister``, the old label no alias),
and the merge ledger's rows of the entities so named.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_core.model.belief_rules import normalize_object, render_text
from memory_core.model.entities import (
    HUB,
    add_alias,
    entity_name,
    lookup,
    rerender,
    set_name,
)
from memory_core.model.hygiene import check_subject, normalize_label
from memory_core.model.merges import merge_in_tx
from memory_core.model.predicates import get_predicate
from memory_core.model.write_tx import WriteTx
from memory_core.vocabulary import ACTIVE, INVALIDATED

NAME_PREDICATE = "name_is"


def sync_hub_name(tx: WriteTx) -> None:
    """Align hub aliases, person shells and the hub's display name with its names."""
    conn, tenant = tx.conn, tx.tenant
    rows = conn.execute(
        "SELECT object_text, status FROM beliefs WHERE tenant = ? AND subject_id = ? AND "
        f"predicate = ? AND status != '{INVALIDATED}' ORDER BY object_text",
        (tenant, HUB, NAME_PREDICATE)).fetchall()
    active = None
    for name, status in rows:
        if check_subject(name) is not None:
            continue
        owner = lookup(conn, tenant, name)
        if owner is None:
            add_alias(tx, HUB, name)
        elif owner != HUB:
            merge_in_tx(tx, owner, HUB)
        if status == ACTIVE:
            active = " ".join(name.split())
    if active is not None and entity_name(conn, tenant, HUB) != active:
        set_name(tx, HUB, active)


def forget_hub_names(tx: WriteTx, names: Iterable[str]) -> set[str]:
    """After ``name_is`` beliefs of the hub were deleted (their slot already re-resolved):
    forget each of ``names`` that no remaining name belief still gives. Returns the alias
    keys forgotten."""
    conn, tenant = tx.conn, tx.tenant
    rows = conn.execute(
        "SELECT object_text, status FROM beliefs WHERE tenant = ? AND subject_id = ? AND "
        f"predicate = ? AND status != '{INVALIDATED}' ORDER BY object_text",
        (tenant, HUB, NAME_PREDICATE)).fetchall()
    gone = {normalize_label(n) for n in names} - {normalize_label(r[0]) for r in rows}
    if not gone:
        return gone
    for norm in sorted(gone):
        conn.execute("DELETE FROM entity_aliases WHERE tenant = ? AND entity_id = ? AND "
                     "alias_norm = ?", (tenant, HUB, norm))
    tx.change("entity", HUB)  # its aliases changed: the mirrors must hear of it
    if normalize_label(entity_name(conn, tenant, HUB)) in gone:
        active = [" ".join(n.split()) for n, status in rows if status == ACTIVE]
        conn.execute("UPDATE entities SET name = ?, updated_at = ? WHERE tenant = ? AND "
                     "entity_id = ?", (active[0] if active else HUB, tx.now, tenant, HUB))
        rerender(tx, HUB)  # the beliefs about the user (subject side)
    _rerender_objects(tx, gone)
    _rename_possessives(tx, gone)
    _drop_merge_rows(tx, gone)
    return gone


def _possessive_of(label: str, gone: set[str]) -> str | None:
    """The rest of ``label`` after a forgotten name's possessive ("Maya's big sister" ->
    " big sister"), or None when it does not start with one (word by word: a name's
    normal form may differ in length from its text)."""
    words = label.split()
    for k in range(1, len(words)):
        head = normalize_label(" ".join(words[:k])).replace("\u2019", "'")
        if head.endswith("'s") and head[:-2] in gone:
            return " " + " ".join(words[k:])
    return None


def _rename_possessives(tx: WriteTx, gone: set[str]) -> None:
    """An entity named for the user by a forgotten name ("Maya's sister") takes the hub's
    name instead; its labels under the forgotten name stop being aliases. When the new name
    already names another entity, the two are the same and merge."""
    conn, tenant = tx.conn, tx.tenant
    hub_name = entity_name(conn, tenant, HUB)
    rests = [(e, _possessive_of(n, gone)) for e, n in conn.execute(
        "SELECT entity_id, name FROM entities WHERE tenant = ? AND entity_id != ?",
        (tenant, HUB)).fetchall()]
    for entity_id, rest in rests:
        if rest is None:
            continue
        new_name = f"{hub_name}'s{rest}"
        for norm, label in conn.execute(
                "SELECT alias_norm, label FROM entity_aliases WHERE tenant = ? AND "
                "entity_id = ?", (tenant, entity_id)).fetchall():
            if _possessive_of(label, gone) is not None:
                conn.execute("DELETE FROM entity_aliases WHERE tenant = ? AND alias_norm = ?",
                             (tenant, norm))
        owner = lookup(conn, tenant, new_name)
        if owner is not None and owner != entity_id:
            merge_in_tx(tx, entity_id, owner)
            continue
        add_alias(tx, entity_id, new_name)
        conn.execute("UPDATE entities SET name = ?, updated_at = ? WHERE tenant = ? AND "
                     "entity_id = ?", (new_name, tx.now, tenant, entity_id))
        rerender(tx, entity_id)
        tx.change("entity", entity_id)


def _rerender_objects(tx: WriteTx, gone: set[str]) -> None:
    """Beliefs whose object is the user under a forgotten name take the hub's name now (a
    negated one has no object entity: it is matched by its text)."""
    conn, tenant = tx.conn, tx.tenant
    name = entity_name(conn, tenant, HUB)
    rows = conn.execute(
        "SELECT id, belief_uid, subject_id, predicate, object_text, object_entity_id, negated "
        "FROM beliefs WHERE tenant = ? AND (object_entity_id = ? OR (object_entity_id IS NULL "
        "AND negated = 1))", (tenant, HUB)).fetchall()
    for row_id, uid, subject_id, predicate, object_text, object_entity, negated in rows:
        if normalize_label(object_text) not in gone or (
                object_entity is None and get_predicate(predicate).object_kind != "entity"):
            continue
        text = render_text(entity_name(conn, tenant, subject_id), predicate, name,
                           bool(negated))
        conn.execute("UPDATE beliefs SET object_text = ?, object_norm = ?, text = ? WHERE "
                     "id = ?", (name, normalize_object(name), text, row_id))
        tx.vector("beliefs", row_id, text)
        tx.change("belief", uid)


def _drop_merge_rows(tx: WriteTx, gone: set[str]) -> None:
    """The merge ledger (live and archived) keeps each merged entity's name: the rows of an
    entity named by a forgotten name go (a person shell of that name merged into the hub,
    or one named for the user by it, merged anywhere)."""
    for table in ("entity_merges", "entity_merges_archive"):
        ids = [i for i, into, from_name in tx.conn.execute(
            f"SELECT id, into_entity_id, from_name FROM {table} WHERE tenant = ?", (tx.tenant,))
            if (into == HUB and normalize_label(from_name) in gone)
            or _possessive_of(from_name, gone)]
        for row_id in ids:
            tx.conn.execute(f"DELETE FROM {table} WHERE id = ?", (row_id,))
