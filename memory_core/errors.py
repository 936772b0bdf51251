"""One error base, few named subclasses. Every message names the object and the fix.

Third-party errors are wrapped at the boundary (``raise ... from e``); the CLI turns any
``MnemoError`` into a ``click.ClickException``. Messages never echo secrets or memory text.
"""

from __future__ import annotations


class MnemoError(Exception):
    """Base of every mnemo error. Messages name the object and the fix.

    ``reason``: optional, a short account that carries ids only (tenant, turn uid, job),
    never memory text. A dead letter keeps it next to the error's type name, so
    `mnemo queue dead` can say why without leaking what was said.
    """

    def __init__(self, *args: object, reason: str | None = None) -> None:
        super().__init__(*args)
        self.reason = reason


class ConfigurationError(MnemoError):
    """A setting is missing, malformed or ambiguous."""


class StoreError(MnemoError):
    """A database cannot be opened or used (missing module, extension, permissions)."""


class StoreDamagedError(StoreError):
    """A database file is not a SQLite database or fails ``PRAGMA quick_check``."""


class StoreUnwritableError(StoreError):
    """A database cannot be written: ``fault`` is ``readonly`` (file, folder or mount) or
    ``full`` (the disk)."""

    def __init__(self, fault: str, message: str) -> None:
        super().__init__(message)
        self.fault = fault


class SchemaTooNewError(StoreError):
    """The database was written by a newer mnemo than this one."""


class EmbedderError(MnemoError):
    """The configured embedder cannot load or run. Never a silent fallback."""


class EmbedderMismatchError(EmbedderError):
    """A worker's embedder differs from the one recorded for the data: it would store rows
    without vectors, so it refuses to start."""


class InvalidInputError(MnemoError):
    """Bad input from a caller: the message names the problem and the fix."""


class UnknownPredicateError(InvalidInputError):
    """A predicate outside the vocabulary in ``memory_core.model.predicates``."""


class UnknownTenantError(InvalidInputError):
    """A tenant that has not been created (``tenant``: the name asked for, when known: the
    CLI suggests close names to an operator; the library never lists other tenants)."""

    def __init__(self, message: str, tenant: str | None = None) -> None:
        super().__init__(message)
        self.tenant = tenant


class NotFoundError(MnemoError):
    """An id that names nothing (in the caller's tenant)."""


class DeletionNotConfirmedError(MnemoError):
    """A verified delete could not confirm every part; nothing was deleted."""


class BrokerError(MnemoError):
    """The task queue cannot be reached or used."""
