"""The real click tree, as the checks of commands written in files (deploy/, docs/) read it."""

from __future__ import annotations

import click


def option_names(command: click.Command) -> dict[str, click.Option]:
    """Every spelling of every option of ``command`` (``--json``, ``-j``, ``--no-x``...)."""
    names: dict[str, click.Option] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                names[name] = param
    return names
