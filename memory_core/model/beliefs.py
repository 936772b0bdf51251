"""Writing beliefs: ``mutate_belief`` and ``invalidate_belief``, one short transaction each.

The rules are in ``belief_rules`` (pure); this module resolves labels to entities, applies
hygiene, inserts by content key (a replay is a no-op), re-resolves the slot, keeps the ego
anchor and the hub's name in step, and lets ``WriteTx`` write counts, vectors and outbox
rows in the same transaction. Subject ``"@speaker"`` is the turn's speaker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memory_core.clock import to_db, utcnow
from memory_core.db.entity_kinds import ROLE_KINDS
from memory_core.db.sqlite import Connection, atomic
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.model.belief_rules import (
    REPLACEABLE,
    Resolution,
    Stated,
    content_key,
    normalize_object,
    render_text,
    replaces_topic,
)
from memory_core.model.ego_anchor import ANCHOR_PREDICATE, anchor_text, needs_anchor, sync_anchor
from memory_core.model.entities import (
    HUB,
    SELF_LABELS,
    classify,
    entity_name,
    lookup,
    resolve,
)
from memory_core.model.hygiene import SPEAKER, check_subject, is_payload_object, normalize_label
from memory_core.model.predicates import get_predicate
from memory_core.model.self_hub import NAME_PREDICATE, forget_hub_names, sync_hub_name
from memory_core.model.slots import NewBelief, Row, load_rows, resolve_new, update_status
from memory_core.model.slots import insert as insert_belief
from memory_core.model.slots import resolve as resolve_slot
from memory_core.model.tenants import require_tenant
from memory_core.model.write_tx import Embeds, WriteTx, write_tx
from memory_core.validate import check_ident, check_text, db_time, optional_db_time
from memory_core.vectors import VectorIndex
from memory_core.vocabulary import ACTIVE, INVALIDATED, PENDING_REVIEW, SOURCES, USER_EXPLICIT

MAX_LABEL_CHARS = 500
MAX_OBJECT_CHARS = 2_000


@dataclass(frozen=True)
class BeliefInput:
    """A statement to record. ``subject`` is a label ("Alice", "I", "@speaker")."""

    subject: str
    predicate: str
    object: str
    valid_from: datetime | str
    source: str = USER_EXPLICIT
    confidence: float = 1.0
    turn_uid: str | None = None
    valid_to: datetime | str | None = None  # an end the statement gives (a deadline)
    expires_at: datetime | str | None = None  # retention date
    pending_review: bool = False
    negated: bool = False  # "no longer ...": valid_from is when it stopped holding
    replaces: bool = False  # "... now": ends the older values of its topic (belief_rules)


@dataclass(frozen=True)
class Checked:
    """A validated ``BeliefInput`` in storage form."""

    subject: str
    predicate: str
    object_text: str
    valid_from: str
    stated_valid_to: str | None
    source: str
    confidence: float
    turn_uid: str | None
    expires_at: str | None
    pending_review: bool
    negated: bool = False
    replaces: bool = False


@dataclass(frozen=True)
class BeliefOutcome:
    action: str  # inserted | existing | rejected
    belief_id: int | None = None
    belief_uid: str | None = None
    status: str | None = None
    subject_id: str | None = None
    object_entity_id: str | None = None
    reason: str | None = None  # hygiene reason when rejected


def check_belief(b: BeliefInput) -> Checked:
    """Validate every field; raises InvalidInputError / UnknownPredicateError."""
    if not isinstance(b, BeliefInput):
        raise InvalidInputError(f"expected a BeliefInput, not {type(b).__name__}")
    get_predicate(b.predicate)
    if b.source not in SOURCES:
        raise InvalidInputError(f"unknown source {b.source!r}: use one of {', '.join(SOURCES)}")
    if (isinstance(b.confidence, bool) or not isinstance(b.confidence, int | float)
            or not 0.0 <= float(b.confidence) <= 1.0):
        raise InvalidInputError("confidence must be a number from 0 to 1")
    subject = check_text(b.subject, "belief subject", MAX_LABEL_CHARS).strip()
    obj = " ".join(check_text(b.object, "belief object", MAX_OBJECT_CHARS).split())
    valid_from = db_time(b.valid_from, "valid_from")
    valid_to = optional_db_time(b.valid_to, "valid_to")
    if valid_to is not None and valid_to <= valid_from:
        raise InvalidInputError("valid_to must be later than valid_from")
    turn_uid = None if b.turn_uid is None else check_ident(b.turn_uid, "turn_uid")
    return Checked(subject, b.predicate, obj, valid_from, valid_to, b.source,
                   float(b.confidence), turn_uid, optional_db_time(b.expires_at, "expires_at"),
                   bool(b.pending_review), bool(b.negated),
                   bool(b.replaces) and not b.negated)


def subject_label(c: Checked, speaker: str | None) -> str:
    if c.subject == SPEAKER:
        if speaker is None:
            raise InvalidInputError("subject '@speaker' needs the turn's speaker: pass turn_uid")
        return speaker
    return c.subject


def predicted_texts(conn: Connection, tenant: str,
                    items: Sequence[tuple[Checked, str | None]]) -> list[str]:
    """The texts a write of ``items`` (beliefs, each with its turn's speaker) will embed,
    computed before the transaction: each belief's, and its subject's anchor when the subject
    will get one (``needs_anchor``, and no belief of ``items`` joins it with the hub). A wrong
    guess is cheap: a text not prepared is embedded when written, one prepared for nothing is
    not stored."""
    linked: set[str] = set()  # labels that a belief of the batch joins with the hub
    for c, speaker in items:
        subject, obj = normalize_label(subject_label(c, speaker)), normalize_label(c.object_text)
        if not c.negated and (subject in SELF_LABELS) != (obj in SELF_LABELS) \
                and get_predicate(c.predicate).object_kind == "entity" \
                and not is_payload_object(c.object_text):
            linked.add(obj if subject in SELF_LABELS else subject)
    texts: list[str] = []
    for c, speaker in items:
        label = subject_label(c, speaker)
        entity_id = lookup(conn, tenant, label)
        name = " ".join(label.split()) if entity_id is None \
            else entity_name(conn, tenant, entity_id)
        texts.append(render_text(name, c.predicate, c.object_text, c.negated))
        norm = normalize_label(label)
        if norm not in SELF_LABELS and norm not in linked and (
                entity_id is None or needs_anchor(conn, tenant, entity_id)):
            texts.append(render_text(entity_name(conn, tenant, HUB), ANCHOR_PREDICATE, name))
    return texts


def count_rejection(tx: WriteTx, reason: str) -> None:
    tx.conn.execute(
        "INSERT INTO hygiene_rejections (tenant, reason, count, last_at) VALUES (?, ?, 1, ?) "
        "ON CONFLICT (tenant, reason) DO UPDATE SET count = count + 1, last_at = excluded.last_at",
        (tx.tenant, reason, tx.now))
    tx.act("hygiene_rejected")


def _object_entity(tx: WriteTx, c: Checked) -> str | None:
    spec = get_predicate(c.predicate)
    if c.negated or spec.object_kind != "entity" or is_payload_object(c.object_text):
        return None
    if normalize_label(c.object_text) not in SELF_LABELS and check_subject(c.object_text):
        return None
    return resolve(tx, c.object_text)


def apply_in_tx(tx: WriteTx, c: Checked, speaker: str | None = None) -> BeliefOutcome:
    """Apply one checked belief inside an open transaction."""
    label = subject_label(c, speaker)
    if normalize_label(label) not in SELF_LABELS:
        reason = check_subject(label)
        if reason is not None:
            count_rejection(tx, reason)
            return BeliefOutcome("rejected", reason=reason)
    subject_id = resolve(tx, label)
    object_norm = normalize_object(c.object_text)
    uid = content_key(tx.tenant, subject_id, c.predicate, object_norm, c.valid_from, c.source,
                      c.negated)
    existing = tx.conn.execute(
        "SELECT id, status, object_entity_id, confidence, turn_uid FROM beliefs "
        "WHERE tenant = ? AND belief_uid = ?", (tx.tenant, uid)).fetchone()
    if existing is not None:
        _merge_provenance(tx, existing, c)
        return BeliefOutcome("existing", existing[0], uid, existing[1], subject_id, existing[2])
    new = NewBelief(
        uid=uid, subject_id=subject_id, predicate=c.predicate, object_text=c.object_text,
        object_norm=object_norm, object_entity_id=_object_entity(tx, c),
        text=render_text(entity_name(tx.conn, tx.tenant, subject_id), c.predicate,
                         c.object_text, c.negated),
        valid_from=c.valid_from, stated_valid_to=c.stated_valid_to, source=c.source,
        confidence=c.confidence, turn_uid=c.turn_uid, expires_at=c.expires_at,
        status=PENDING_REVIEW if c.pending_review else ACTIVE, negated=c.negated)
    res = resolve_new(tx, subject_id, c.predicate, object_norm, new)
    row_id = insert_belief(tx, new, res)
    subject_kind, object_kind = ROLE_KINDS.get(c.predicate, (None, None))
    classify(tx, subject_id, subject_kind)
    classify(tx, new.object_entity_id, object_kind)
    _after_change(tx, subject_id, new.object_entity_id, c.predicate)
    if c.replaces:
        _end_replaced(tx, c, subject_id, object_norm, speaker)
    return BeliefOutcome("inserted", row_id, uid, res.status, subject_id, new.object_entity_id)


def _end_replaced(tx: WriteTx, c: Checked, subject_id: str, object_norm: str,
                  speaker: str | None) -> None:
    """A replacing statement ends the older current values of its topic: each gets a
    negation at the statement's start (a row like "no longer likes spicy food", with the
    statement's source and turn), so slot resolution closes it and history keeps it.

    It reads what is stored: a same-topic value written later with an earlier world time
    (turns arriving out of order) is not ended by it.
    """
    new = Stated(c.predicate, object_norm, c.stated_valid_to)
    family = sorted(REPLACEABLE)
    rows = tx.conn.execute(
        f"SELECT predicate, object_text, object_norm, stated_valid_to FROM beliefs "
        f"WHERE tenant = ? AND subject_id = ? AND predicate IN ({','.join('?' * len(family))}) "
        f"AND negated = 0 AND status IN ('active', 'conflict') AND valid_from < ?",
        (tx.tenant, subject_id, *family, c.valid_from)).fetchall()
    label = subject_label(c, speaker)
    for predicate, object_text, old_norm, due in rows:
        if replaces_topic(new, Stated(predicate, old_norm, due)):
            apply_in_tx(tx, replace(c, subject=label, predicate=predicate,
                                    object_text=object_text, stated_valid_to=None,
                                    negated=True, replaces=False, pending_review=False))


def _merge_provenance(tx: WriteTx, existing: tuple[Any, ...], c: Checked) -> None:
    """A replay keeps the row; its confidence and provenance merge order-independently."""
    row_id, _, _, confidence, turn_uid = existing
    new_conf = max(confidence, c.confidence)
    new_turn = min(t for t in (turn_uid, c.turn_uid) if t is not None) \
        if (turn_uid or c.turn_uid) else None
    if (new_conf, new_turn) != (confidence, turn_uid):
        tx.conn.execute("UPDATE beliefs SET confidence = ?, turn_uid = ? WHERE id = ?",
                        (new_conf, new_turn, row_id))
    tx.act("belief_existing")


def _after_change(tx: WriteTx, subject_id: str, object_entity_id: str | None,
                  predicate: str) -> None:
    sync_anchor(tx, subject_id)
    if object_entity_id is not None and subject_id == HUB:
        sync_anchor(tx, object_entity_id)
    if subject_id == HUB and predicate == NAME_PREDICATE:
        sync_hub_name(tx)


def _prepare(conn: Connection, index: VectorIndex, tenant: str,
             items: list[tuple[Checked, str | None]]) -> Embeds:
    embeds = Embeds(index)
    embeds.prepare(predicted_texts(conn, tenant, items))
    return embeds


def mutate_belief(conn: Connection, index: VectorIndex, tenant: str, belief: BeliefInput,
                  *, speaker: str | None = None) -> BeliefOutcome:
    """Record one belief in one transaction, applying every write rule.

    Idempotent: the same statement again returns ``action="existing"``. A hygiene rejection
    returns ``action="rejected"`` with the reason (and is counted). Raises
    UnknownTenantError, UnknownPredicateError or InvalidInputError before writing anything.
    """
    require_tenant(conn, tenant)
    checked = check_belief(belief)
    embeds = _prepare(conn, index, tenant, [(checked, speaker)])
    with write_tx(conn, index, tenant, embeds) as tx:
        outcome = apply_in_tx(tx, checked, speaker)
    return outcome


def _find(conn: Connection, tenant: str, belief: int | str) -> Any:
    where = "id = ?" if isinstance(belief, int) else "belief_uid = ?"
    rows = load_rows(conn, tenant, where, (belief,))
    if not rows:
        raise NotFoundError(f"belief {belief!r} does not exist in tenant {tenant!r}")
    return rows[0]


@dataclass(frozen=True)
class InvalidateOutcome:
    belief_id: int
    belief_uid: str
    previous_status: str
    reopened: list[str]  # uids whose status changed because of it (e.g. the older value)


def invalidate_belief(conn: Connection, index: VectorIndex, tenant: str,
                      belief: int | str) -> InvalidateOutcome:
    """Mark a belief invalidated (never true); its slot is re-resolved, so an older value it
    had closed becomes active again. Idempotent. Raises NotFoundError."""
    require_tenant(conn, tenant)
    if isinstance(belief, bool) or not isinstance(belief, int | str):
        raise InvalidInputError("belief must be a belief id (int) or belief_uid (str)")
    embeds = Embeds(index)
    with atomic(conn, tenants=(tenant,)):
        tx = WriteTx(conn, index, tenant, to_db(utcnow()), embeds)
        row = _find(conn, tenant, belief)
        reopened = invalidate_in_tx(tx, row)
        tx.flush()
    return InvalidateOutcome(row.id, row.uid, row.status, reopened)


def invalidate_in_tx(tx: WriteTx, row: Row) -> list[str]:
    """Mark ``row`` invalidated inside an open transaction and re-resolve its slot; the uids
    whose status changed because of it. Nothing changes for a row already invalidated.
    Anchors need no re-check: they count a hub edge of any status (``ego_anchor``)."""
    predicate, object_text = tx.conn.execute(
        "SELECT predicate, object_text FROM beliefs WHERE id = ?", (row.id,)).fetchone()
    update_status(tx, row, Resolution(INVALIDATED, row.valid_to))
    reopened = resolve_slot(tx, row.subject_id, predicate, row.object_norm)
    if row.subject_id == HUB and predicate == NAME_PREDICATE:
        # A name no belief gives any more stops naming the user (their only name too: the
        # hub is "user" again), as when its turn is deleted; then the names left align.
        forget_hub_names(tx, [object_text])
        sync_hub_name(tx)
    return reopened


__all__ = ["BeliefInput", "BeliefOutcome", "InvalidateOutcome", "anchor_text",
           "invalidate_belief", "invalidate_in_tx", "mutate_belief"]
