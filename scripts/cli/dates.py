"""Dates on the command line: one click type for every option that takes a date or time,
and the two forms every table prints them in.

Accepted: ``YYYY-MM-DD`` (midnight UTC) or any ISO-8601 date-time; UTC when no zone is
given, converted to UTC when one is. What the Python API asks of its callers (an aware
datetime) is never put to a CLI user: the command gets an aware UTC datetime.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import click

from memory_core.clock import from_db, to_db

ACCEPTED = "YYYY-MM-DD or ISO-8601, e.g. 2024-05-01T12:00:00+02:00; UTC when no zone is given"


class DateTimeParam(click.ParamType):
    """``YYYY-MM-DD`` or ISO-8601 -> an aware UTC datetime (naive input is UTC)."""

    name = "DATE"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            moment = value
        else:
            text = str(value).strip()
            try:
                if len(text) > 64:
                    raise ValueError
                moment = datetime.fromisoformat(text)
            except ValueError:
                self.fail(f"{value!r} is not a date: use {ACCEPTED}", param, ctx)
        if moment.tzinfo is None or moment.utcoffset() is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:  # 0001-01-01 east of UTC: before the first representable day
            moment = datetime.min.replace(tzinfo=UTC)
        if not 1000 <= moment.year <= 9999:
            self.fail(f"{value!r} is out of range: use a year from 1000 to 9999", param, ctx)
        return moment


DATE = DateTimeParam()


def date_option(*decls: str, help: str, **kwargs: Any) -> Any:
    """A click option of type ``DATE`` whose help says the accepted forms."""
    return click.option(*decls, type=DATE, default=None, metavar="DATE",
                        help=f"{help} ({ACCEPTED}).", **kwargs)


def stored(moment: datetime | None) -> str | None:
    """An option's datetime in the storage encoding (what the model's queries take)."""
    return None if moment is None else to_db(moment)


def _moment(value: datetime | str) -> datetime:
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            return from_db(value)
        except ValueError:  # ISO-8601 in another form (a manifest's, a broker's)
            moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _show(value: datetime | date | str | None, form: str) -> str:
    if not value:
        return ""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    try:
        return _moment(value).astimezone(UTC).strftime(form)
    except ValueError:  # not a time after all: shown as it is rather than hidden
        return str(value)


def show_day(value: datetime | date | str | None) -> str:
    """``YYYY-MM-DD`` (UTC) of a datetime or a stored time; "" for None."""
    return _show(value, "%Y-%m-%d")


def show_time(value: datetime | str | None) -> str:
    """ISO-8601 UTC to the second with Z (``2024-05-01T12:00:00Z``); "" for None."""
    return _show(value, "%Y-%m-%dT%H:%M:%SZ")
