"""Every `mnemo ...` command the operator docs show exists, with every option it uses.

The docs below are read for fenced code blocks; each shell line in them that runs `mnemo`
(after a `$ ` prompt, environment assignments, `&&`, `;` or `|`, as `mnemo` or a path ending in
`/mnemo`, or in a compose/Kubernetes exec list `["mnemo", ...]`; in a `text` block, which holds
diagrams and output, only a line that starts with `mnemo`) is checked against the real
click tree (``scripts.cli.main``): the command path must exist and its `--help` must run
(CliRunner, in-process), every option must be one of that command's options, and there must
be no more arguments than it takes. Placeholders (`--to DIR`, `--tenant T`) are fine: values
are not type-checked. A failure names the file and line of every bad command.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scripts.cli import main
from tests.helpers.cli_tree import option_names

REPO = Path(__file__).resolve().parent.parent
DOCS = ["docs/operations.md", "docs/architecture.md", "README.md", "deploy/README.md"]
# Info languages of fenced blocks that hold no shell lines (an exec list in yaml still counts).
NOT_SHELL = {"python", "py", "json", "toml", "ini"}
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
EXEC_LIST = re.compile(r"\[\s*(?:\"CMD\"\s*,\s*)?\"mnemo\"\s*,[^\]]*\]")
OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}
WRAPPERS = {"nohup", "exec", "env", "sudo", "watch", "time"}  # words that run the next one
HELP = {"-h", "--help"}


@dataclass(frozen=True)
class DocCommand:
    file: str
    line: int
    argv: tuple[str, ...]  # the words after `mnemo`

    def where(self) -> str:
        return f"{self.file}:{self.line}: `mnemo {' '.join(self.argv)}`"


def code_lines(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, line, fence language) of every line inside a fenced code block; a line
    ending in a backslash is joined with the next (numbered as its first)."""
    fence: str | None = None
    lang = ""
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if match and fence is None:
            fence, lang, pending = match.group(1), match.group(2).lower(), None
            continue
        if match and match.group(1) == fence and not match.group(2):  # the closing fence
            fence, lang, pending = None, "", None
            continue
        if fence is None:
            continue
        start, joined = pending if pending else (number, "")
        joined += line
        if joined.endswith("\\"):
            pending = (start, joined[:-1] + " ")
            continue
        pending = None
        yield start, joined, lang


def mnemo_argvs(line: str, *, first_only: bool = False) -> Iterator[tuple[str, ...]]:
    """The argument lists of every `mnemo` run on one shell line (``first_only``: only a
    line that starts with it: a `text` block holds diagrams and output, not shell)."""
    for match in EXEC_LIST.finditer(line):  # ["CMD", "mnemo", "health", "--worker"]
        words = json.loads(match.group(0))
        yield tuple(words[words.index("mnemo") + 1:])
    line = re.sub(r"^\s*\$\s+", "", line)  # a shell prompt
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: prose in a text block, not a command
        return
    segment: list[str] = []
    for word in [*words, ";"]:
        if word in OPERATORS or set(word) <= set("&|;<>()"):
            argv = _mnemo_in(segment)
            if argv is not None:
                yield argv
            if first_only:
                return
            segment = []
        else:
            segment.append(word)


def _mnemo_in(segment: list[str]) -> tuple[str, ...] | None:
    """The words after `mnemo` when this simple command runs mnemo, else None."""
    i = 0
    while i < len(segment):
        word = segment[i]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word) or word in WRAPPERS:
            i += 1
        elif word == "timeout" and i + 1 < len(segment):
            i += 2
        else:
            break
    if i < len(segment) and (segment[i] == "mnemo" or segment[i].endswith("/mnemo")):
        return tuple(segment[i + 1:])
    return None


def doc_commands(root: Path, files: list[str]) -> list[DocCommand]:
    found = []
    for rel in files:
        path = root / rel
        if not path.exists():
            continue
        for number, line, lang in code_lines(path.read_text(encoding="utf-8")):
            if lang in NOT_SHELL:
                continue
            found.extend(DocCommand(rel, number, argv)
                         for argv in mnemo_argvs(line, first_only=lang == "text"))
    return found


@cache
def help_exit(path: tuple[str, ...]) -> tuple[int, str]:
    """`mnemo PATH --help`, in-process on the real CLI object."""
    result = CliRunner().invoke(main, [*path, "--help"])
    return result.exit_code, result.output


def _takes_value(option: click.Option) -> bool:
    return not option.is_flag and not option.count


def _max_args(command: click.Command) -> float:
    total = 0.0
    for param in command.params:
        if isinstance(param, click.Argument):
            total += float("inf") if param.nargs < 0 else param.nargs
    return total


def problems(cmd: DocCommand, root: click.Command = main) -> list[str]:
    """What is wrong with one documented command: an unknown command, an unknown option, an
    option missing its value, too many arguments, or a failing `--help`."""
    command, path, args, words = root, [], [], list(cmd.argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            args.extend(words[i + 1:])
            break
        if word.startswith("-") and word != "-" and not re.fullmatch(r"-\d+(\.\d+)?", word):
            error, i = _option(command, words, i)
            if error:
                return [f"{cmd.where()}: {error} (`mnemo {' '.join(path)} --help` lists them)"]
            continue
        if isinstance(command, click.Group) and not args:
            sub = command.get_command(click.Context(command), word)
            if sub is None:
                where = " ".join(["mnemo", *path])
                return [f"{cmd.where()}: no command `{word}` under `{where}`"]
            command, path = sub, [*path, word]
        else:
            args.append(word)
        i += 1
    out = []
    if len(args) > _max_args(command):
        out.append(f"{cmd.where()}: `mnemo {' '.join(path)}` takes at most "
                   f"{_max_args(command):g} argument(s), the doc gives {len(args)}: {args}")
    code, text = help_exit(tuple(path))
    if code != 0:
        out.append(f"{cmd.where()}: `mnemo {' '.join(path)} --help` exited {code}: {text}")
    return out


def _option(command: click.Command, words: list[str], i: int) -> tuple[str | None, int]:
    """Check the option at ``words[i]``; return an error (or None) and the next index."""
    word = words[i]
    options = option_names(command)
    name, eq, _value = word.partition("=")
    if word.startswith("--") or len(word) == 2 or eq:
        if name in HELP:
            return None, i + 1
        option = options.get(name)
        if option is None:
            return f"no option `{name}` on `{command.name}`", i
        if _takes_value(option) and not eq:
            if i + 1 >= len(words):
                return f"option `{name}` needs a value", i
            return None, i + 2
        return None, i + 1
    # -abc: short flags together, or -n5: a short option with its value attached
    option = options.get(word[:2])
    if option is None:
        return f"no option `{word[:2]}` on `{command.name}`", i
    if _takes_value(option):
        return None, i + 1
    for letter in word[2:]:
        if f"-{letter}" not in options and f"-{letter}" not in HELP:
            return f"no option `-{letter}` on `{command.name}`", i
    return None, i + 1


# The documents each show at least this many commands (so a broken extractor cannot pass).
AT_LEAST = {"docs/operations.md": 40, "docs/architecture.md": 3, "README.md": 20}


@pytest.mark.parametrize("rel", sorted(AT_LEAST))
def test_the_docs_show_commands(rel: str) -> None:
    found = doc_commands(REPO, [rel])
    assert len(found) >= AT_LEAST[rel], f"{rel}: only {len(found)} `mnemo` commands found"


def test_every_documented_command_and_option_exists() -> None:
    found = doc_commands(REPO, DOCS)
    assert found
    bad = [p for cmd in found for p in problems(cmd)]
    assert not bad, "\n".join(["commands in the docs that the CLI does not have:", *bad])


def test_the_check_finds_what_is_wrong(tmp_path: Path) -> None:
    """A planted doc: every kind of mistake is reported with its file and line, and what
    is right passes (the prompt, env, `&&`, comments, continuations, exec lists)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "operations.md").write_text(
        "Some prose mentioning mnemo frobnicate outside a block.\n"
        "```sh\n"
        "mnemo queue stats --json           # fine\n"
        "$ MNEMO_DATA_DIR=/x mnemo health --worker --ready && echo ok\n"
        "mnemo restore latest \\\n"
        "  --to DIR --dry-run\n"
        "mnemo queue frobnicate\n"
        "mnemo backup now --verbose\n"
        "mnemo memory recollect UID -c 3 extra\n"
        ".venv/bin/mnemo recall\n"
        "mnemo queue requeue --message-id\n"
        "```\n"
        "```python\n"
        "mnemo nonsense  # not shell\n"
        "```\n"
        "```text\n"
        "WORKER POOL (mnemo worker: N processes) | mnemo bogus\n"
        "mnemo queue stats | dead\n"
        "```\n"
        "```yaml\n"
        'test: ["CMD", "mnemo", "health", "--wrker"]\n'
        "```\n", encoding="utf-8")
    found = doc_commands(tmp_path, ["docs/operations.md", "missing.md"])
    assert [(c.line, c.argv[:2]) for c in found] == [
        (3, ("queue", "stats")), (4, ("health", "--worker")), (5, ("restore", "latest")),
        (7, ("queue", "frobnicate")), (8, ("backup", "now")), (9, ("memory", "recollect")),
        (10, ("recall",)), (11, ("queue", "requeue")), (18, ("queue", "stats")),
        (21, ("health", "--wrker"))]
    bad = [p for cmd in found for p in problems(cmd)]
    assert len(bad) == 5, bad
    assert bad[0].startswith("docs/operations.md:7: `mnemo queue frobnicate`: no command "
                             "`frobnicate` under `mnemo queue`")
    assert bad[1].startswith("docs/operations.md:8: `mnemo backup now --verbose`: no option "
                             "`--verbose` on `now`")
    assert bad[2].startswith("docs/operations.md:9:") and "at most 1 argument" in bad[2]
    assert bad[3].startswith("docs/operations.md:11:") and "needs a value" in bad[3]
    assert bad[4].startswith("docs/operations.md:21:") and "`--wrker`" in bad[4]


def test_a_line_that_runs_no_mnemo_is_not_a_command() -> None:
    for line in ["systemctl start mnemo-up", "echo mnemo", "ls /var/lib/mnemo",
                 "redis-cli CONFIG GET appendonly", "pip install mnemo  # the mnemo up part"]:
        assert list(mnemo_argvs(line)) == [], line
    assert list(mnemo_argvs("mnemo health; echo $?")) == [("health",)]
    assert list(mnemo_argvs("kill $(cat up.pid) | mnemo queue stats")) == [("queue", "stats")]


def test_the_runbook_walks_the_switch_to_the_postgres_primary() -> None:
    """docs/operations.md section 10 walks the switch with `mnemo mirror promote`, which
    exists, after a clean reconcile."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text[text.index("## 10. Moving to Postgres"):text.index("## 11.")]
    assert help_exit(("mirror", "promote"))[0] == 0
    assert "mnemo mirror promote --yes" in section
    assert section.index("mnemo mirror reconcile --dry-run") < section.index(
        "mnemo mirror promote --yes")
    assert "not yet available" not in section
