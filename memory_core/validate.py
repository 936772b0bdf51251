"""Checks of caller input shared by the write API. Each raises InvalidInputError that names
the field and the fix, never echoing the (possibly private) text itself."""

from __future__ import annotations

import re
from datetime import datetime

from memory_core.clock import ensure_utc, parse_iso, to_db
from memory_core.errors import InvalidInputError

_IDENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")


def check_text(value: object, what: str, max_chars: int) -> str:
    """``value`` as text: a ``str``, non-empty after strip, at most ``max_chars``, no NUL,
    encodable as UTF-8 (no lone surrogates). Bytes are refused: decode them first."""
    if isinstance(value, bytes | bytearray | memoryview):
        raise InvalidInputError(
            f"{what} must be text (str), not bytes: decode it as UTF-8 first "
            "(e.g. data.decode('utf-8'))")
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be text (str), not {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{what} is empty: pass the words that were said")
    if len(value) > max_chars:
        raise InvalidInputError(
            f"{what} has {len(value)} characters, more than the limit of {max_chars}: split "
            "it, or raise MNEMO_MAX_TURN_CHARS")
    if "\x00" in value:
        raise InvalidInputError(f"{what} contains a NUL character: remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            f"{what} is not valid Unicode (it holds lone surrogates, e.g. from bytes decoded "
            "with errors='surrogateescape'): decode the input as UTF-8 with errors='strict'"
        ) from None
    return value


def check_ident(value: object, what: str) -> str:
    """An id chosen by the caller (turn_uid, session id): 1-128 safe characters."""
    if not isinstance(value, str) or not _IDENT_RE.match(value):
        raise InvalidInputError(
            f"{what} must be 1-128 characters of letters, digits and _ . : @ / - starting with "
            "a letter or digit")
    return value


def check_time(value: object, what: str) -> datetime:
    """An aware datetime, or ISO-8601 text with a zone; malformed values are refused."""
    if isinstance(value, str):
        return parse_iso(value, what)
    if not isinstance(value, datetime):
        raise InvalidInputError(
            f"{what} must be a timezone-aware datetime or ISO-8601 text like "
            "2024-05-01T12:00:00Z")
    return ensure_utc(value, what)


def db_time(value: object, what: str) -> str:
    """``check_time`` in the storage encoding (and within the years it can hold)."""
    moment = check_time(value, what)
    if not 1000 <= moment.year <= 9999:  # the storage encoding is fixed-width
        raise InvalidInputError(f"{what} is out of range: use a year from 1000 to 9999")
    return to_db(moment)


def optional_db_time(value: object, what: str) -> str | None:
    return None if value is None else db_time(value, what)
