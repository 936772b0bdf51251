"""The data directory check of the commands that only read memory."""

from __future__ import annotations

import click

from memory_core.settings import Settings
from scripts.cli import exit_codes


def require_data_dir(settings: Settings, exit_code: int = exit_codes.MNEMO_ERROR) -> None:
    """For a command that only reads memory: refuse a data dir that does not exist, in one
    line, before anything opens it (opening a database creates the file and its folder, so a
    mistyped MNEMO_DATA_DIR left an empty memory behind and reported it as empty)."""
    if settings.data_dir.is_dir():
        return
    no_data_dir = type("NoDataDir", (click.ClickException,), {"exit_code": exit_code})
    raise no_data_dir(
        f"no memory at {settings.data_dir} (MNEMO_DATA_DIR): start it with `mnemo up`, or "
        "set MNEMO_DATA_DIR to the data directory the workers use")
