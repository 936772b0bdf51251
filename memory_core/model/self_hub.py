"""The hub's own name: the user's name collapses onto the hub ``user``.

Every name the user has given for themselves (a ``name_is`` belief of the hub that is not
invalidated) becomes a hub alias, so later statements about "Mubder" land on the hub. An
entity minted earlier under that name (a person shell) is merged into the hub. The hub's
display name is the currently active ``name_is`` value. All of it is a function of the
beliefs, so arrival order does not change the outcome.
"""

from __future__ import annotations

from memory_core.model.entities import HUB, add_alias, entity_name, lookup, set_name
from memory_core.model.hygiene import check_subject
from memory_core.model.merges import merge_in_tx
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
