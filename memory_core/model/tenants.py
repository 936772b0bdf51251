"""Tenants: every row and query carries one; nothing crosses them.

A tenant must be created before memory is written for it (``mnemo tenant add``); the
default tenant (``MNEMO_TENANT``) is created by the workers (``Memory.open()`` never writes
the state db).
"""

from __future__ import annotations

import re

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.errors import InvalidInputError, UnknownTenantError

HUB = "user"  # every tenant's hub entity: the person memory is about
HUB_KIND = "person"

_TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def validate_tenant(tenant: object) -> str:
    """Return the tenant id or raise InvalidInputError naming the valid form."""
    if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
        raise InvalidInputError(
            "tenant must be 1-64 characters of a-z, 0-9, '_', '.', '-' starting with a letter "
            "or digit (e.g. 'default' or 'acme-42')"
        )
    return tenant


def create_tenant(conn: Connection, tenant: str) -> bool:
    """Create ``tenant`` if it does not exist. Returns True when it was created. Idempotent."""
    validate_tenant(tenant)
    with atomic(conn, tenants=(tenant,)):
        now = to_db(utcnow())
        cur = conn.execute(
            "INSERT OR IGNORE INTO tenants (tenant, created_at) VALUES (?, ?)", (tenant, now)
        )
        created = cur.rowcount == 1
        ensure_hub(conn, tenant, now)  # the hub entity ``user``, in the same transaction
    return created


def ensure_hub(conn: Connection, tenant: str, now: str) -> None:
    """Create the tenant's hub entity ``user`` (idempotent; a new hub goes to the mirrors'
    outbox in the same transaction)."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO entities (tenant, entity_id, name, kind, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?)", (tenant, HUB, HUB, HUB_KIND, now, now))
    if cur.rowcount == 1:
        conn.execute("INSERT INTO outbox (tenant, kind, object_id, op, created_at) VALUES "
                     "(?, 'entity', ?, 'upsert', ?)", (tenant, HUB, now))
    conn.execute(
        "INSERT OR IGNORE INTO entity_aliases (tenant, alias_norm, entity_id, label, created_at) "
        "VALUES (?, ?, ?, ?, ?)", (tenant, HUB, HUB, HUB, now))


def require_tenant(conn: Connection, tenant: object) -> str:
    """Return ``tenant`` if it exists, else raise UnknownTenantError with the fix."""
    validate_tenant(tenant)
    row = conn.execute("SELECT 1 FROM tenants WHERE tenant = ?", (tenant,)).fetchone()
    if row is None:
        raise UnknownTenantError(
            f"tenant {tenant!r} does not exist: check the name with `mnemo tenant list`, or "
            f"create it with `mnemo tenant add {tenant}`", tenant=str(tenant)
        )
    return tenant  # type: ignore[return-value]


def list_tenants(conn: Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT tenant FROM tenants ORDER BY tenant")]
