"""Time: timezone-aware UTC everywhere, one storage encoding.

Stored datetimes are fixed-width ISO-8601 text, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, so that
text order is time order in SQL comparisons and indexes. Naive datetimes are refused.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.errors import InvalidInputError

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utcnow() -> datetime:
    return datetime.now(UTC)


def ensure_utc(value: datetime, what: str = "datetime") -> datetime:
    """Return ``value`` in UTC; refuse a naive datetime (its zone would be a guess)."""
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(
            f"{what} has no time zone: pass a timezone-aware datetime (e.g. tzinfo=UTC)"
        )
    return value.astimezone(UTC)


def to_db(value: datetime) -> str:
    """Encode an aware datetime for storage."""
    return ensure_utc(value).strftime(_FORMAT)


def from_db(text: str) -> datetime:
    """Decode a stored datetime (ValueError for text not in the storage encoding)."""
    # fromisoformat is ~10x faster than strptime (a turn decodes several); the shape check
    # keeps it exactly as strict as the format.
    if len(text) == 27 and text[10] == "T" and text[19] == "." and text[26] == "Z":
        return datetime.fromisoformat(text[:26]).replace(tzinfo=UTC)
    return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC)


def to_display(value: datetime) -> str:
    """An aware datetime as ISO-8601 UTC to the second, for people: ``2024-05-01T12:00:00Z``."""
    return ensure_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str, what: str = "time") -> datetime:
    """Parse caller-supplied ISO-8601 text (must carry a zone, or end in Z)."""
    if not isinstance(text, str) or len(text) > 64:
        raise InvalidInputError(f"{what} must be ISO-8601 text like 2024-05-01T12:00:00Z")
    try:
        value = datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"{what} is not an ISO-8601 time: use a form like 2024-05-01T12:00:00Z"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:  # text: no Python advice here
        raise InvalidInputError(f"{what} has no time zone: end it with Z (UTC) or an offset "
                                "like +02:00, e.g. 2024-05-01T12:00:00Z")
    return ensure_utc(value, what)
