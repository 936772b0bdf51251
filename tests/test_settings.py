"""Settings: strict parsing, clear refusals that never echo a value, and complete docs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from memory_core.errors import ConfigurationError
from memory_core.settings import VARIABLES, Settings, parse_bool

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_defaults_need_no_configuration() -> None:
    s = Settings.from_env({})
    assert s.embedder == "hash"
    assert s.broker_kind == "embedded"
    assert s.state_db_path.name == "memory_state.db"
    assert s.ops_db_path.name == "memory_ops.db"
    assert s.state_db_path.parent == s.ops_db_path.parent


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("1", True), ("YES", True), (" on ", True),
     ("false", False), ("0", False), ("No", False), ("off", False)],
)
def test_booleans_are_parsed_explicitly(raw: str, expected: bool) -> None:
    s = Settings.from_env({"MNEMO_EMBED_ALLOW_DOWNLOAD": raw})
    assert s.embed_allow_download is expected


@pytest.mark.parametrize(
    ("var", "raw", "fragment"),
    [
        ("MNEMO_EMBED_ALLOW_DOWNLOAD", "maybe", "true/false"),
        ("MNEMO_EMBED_ALLOW_DOWNLOAD", "2", "true/false"),
        ("MNEMO_WORKER_PROCESSES", "two", "whole number from 1 to 256"),
        ("MNEMO_WORKER_PROCESSES", "0", "whole number from 1 to 256"),
        ("MNEMO_WORKER_PROCESSES", "1.5", "whole number"),
        ("MNEMO_EMBEDDER", "openai", "hash, fastembed"),
        ("MNEMO_LOG_FORMAT", "xml", "auto, json, console"),
        ("MNEMO_TENANT", "Bad Tenant!", "tenant id"),
        ("MNEMO_BROKER_URL", "amqp://x", "sqlite://, redis://"),
        ("MNEMO_POSTGRES_URL", "mysql://u:pw@h/db", "postgresql://"),
        ("MNEMO_NEO4J_URL", "http://h:7474", "bolt://"),
    ],
)
def test_bad_values_name_the_variable_and_valid_forms(var: str, raw: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env({var: raw})
    assert var in str(err.value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(("var", "raw"), [
    ("MNEMO_RECALL_MAX_ITEMS", "ten"), ("MNEMO_RECALL_MAX_ITEMS", "5000"),
    ("MNEMO_REINFORCE_BOOST", "lots"), ("MNEMO_LOG_FORMAT", "xml"),
    ("MNEMO_SQLITE_BM25", "maybe")])
def test_a_bad_number_boolean_or_choice_is_named_in_its_error(var: str, raw: str) -> None:
    # "MNEMO_RECALL_MAX_ITEMS must be a whole number from 1 to 1000" left a tired operator
    # to find which value of the environment it meant. These hold no secret.
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env({var: raw})
    assert str(err.value).endswith(f", not {raw!r}")


def test_a_refused_secret_is_never_echoed() -> None:
    secret = "hunter2-very-secret"
    for var, raw in [
        ("MNEMO_POSTGRES_URL", f"mysql://u:{secret}@h/db"),
        ("MNEMO_BROKER_URL", f"amqp://u:{secret}@h"),
        ("MNEMO_NEO4J_URL", f"http://u:{secret}@h"),
        ("MNEMO_POSTGRES_URL", f"postgresql://u:{secret}@h:99999/db"),
    ]:
        with pytest.raises(ConfigurationError) as err:
            Settings.from_env({var: raw})
        assert secret not in str(err.value)


def test_unknown_variable_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ConfigurationError, match="did you mean MNEMO_EMBEDDER"):
        Settings.from_env({"MNEMO_EMBEDER": "hash"})


def test_test_variables_and_other_prefixes_are_ignored() -> None:
    Settings.from_env({"MNEMO_TEST_MODEL_PATH": "/x", "HOME": "/root", "PATH": "/bin"})


def test_contradictions_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="MNEMO_EMBEDDER is hash"):
        Settings.from_env({"MNEMO_EMBED_MODEL_PATH": "/models/x"})
    with pytest.raises(ConfigurationError, match="without MNEMO_EMBED_MODEL"):
        Settings.from_env({"MNEMO_EMBEDDER": "fastembed", "MNEMO_EMBED_MODEL_PATH": "/m"})
    with pytest.raises(ConfigurationError, match="without MNEMO_NEO4J_URL"):
        Settings.from_env({"MNEMO_NEO4J_PASSWORD": "pw123456"})


def test_settings_are_frozen() -> None:
    s = Settings.from_env({})
    with pytest.raises(AttributeError):
        s.embedder = "fastembed"  # type: ignore[misc]


def test_redacted_view_hides_passwords_and_shows_canonical_urls() -> None:
    s = Settings.from_env({
        "MNEMO_POSTGRES_URL": "POSTGRES://mnemo@DB.example/mnemo",
        "MNEMO_POSTGRES_PASSWORD": "pgsecret",
        "MNEMO_BROKER_URL": "redis://cache",
        "MNEMO_REDIS_PASSWORD": "redsecret",
        "MNEMO_NEO4J_URL": "bolt://graph:7687",
        "MNEMO_NEO4J_PASSWORD": "neosecret",
    })
    view = repr(s.redacted()) + repr(s)
    assert "pgsecret" not in view and "neosecret" not in view and "redsecret" not in view
    assert "postgresql://mnemo@db.example:5432/mnemo" in view
    assert "redis://cache:6379/0" in view


def test_a_password_inside_a_url_is_refused_and_not_echoed() -> None:
    for var, raw, where in [
        ("MNEMO_POSTGRES_URL", "postgresql://u:s3cr3t-pw@h/db", "MNEMO_POSTGRES_PASSWORD"),
        ("MNEMO_BROKER_URL", "redis://:s3cr3t-pw@h:6379/0", "MNEMO_REDIS_PASSWORD"),
        ("MNEMO_NEO4J_URL", "bolt://neo4j:s3cr3t-pw@h", "MNEMO_NEO4J_PASSWORD"),
    ]:
        with pytest.raises(ConfigurationError) as err:
            Settings.from_env({var: raw})
        assert "s3cr3t-pw" not in str(err.value)
        assert where in str(err.value) and "password" in str(err.value)
    with pytest.raises(ConfigurationError) as err:  # keyword overrides are parsed too
        Settings.from_env({}, postgres_url="postgresql://u:s3cr3t-pw@h/db")
    assert "s3cr3t-pw" not in str(err.value)


def test_every_variable_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    documented = set(re.findall(r"`(MNEMO_[A-Z0-9_]+)`", text))
    missing = [v.env for v in VARIABLES if v.env not in documented]
    assert not missing, f"add these to docs/configuration.md: {missing}"
    unknown = documented - {v.env for v in VARIABLES} - {"MNEMO_TEST_MODEL_PATH"}
    assert not unknown, f"docs/configuration.md documents variables that do not exist: {unknown}"


def test_no_module_but_settings_reads_the_environment() -> None:
    repo = Path(__file__).resolve().parent.parent
    offenders = []
    for package in ("memory_core", "workers", "schedules", "scripts"):
        for path in (repo / package).rglob("*.py"):
            if path.name == "settings.py" and path.parent.name == "memory_core":
                continue
            text = path.read_text(encoding="utf-8")
            if re.search(r"os\.environ|os\.getenv|getenv\(", text):
                offenders.append(str(path.relative_to(repo)))
    assert not offenders, f"only memory_core/settings.py may read the environment: {offenders}"


def test_every_setting_has_exactly_one_variable() -> None:
    """A Settings field without a MNEMO_* variable could be set by no one (and would be
    missing from docs/configuration.md, which lists the variables)."""
    fields = [f.name for f in dataclasses.fields(Settings)]
    by_field = [v.field for v in VARIABLES]
    assert sorted(by_field) == sorted(set(by_field)), "a field has two variables"
    assert sorted(fields) == sorted(by_field), (
        f"fields without a variable: {sorted(set(fields) - set(by_field))}; "
        f"variables without a field: {sorted(set(by_field) - set(fields))}")


# Defaults computed from another setting or the environment, written out in words.
COMPUTED_DEFAULTS = {"MNEMO_DATA_DIR", "MNEMO_BACKUP_DIR"}


def documented_defaults(text: str) -> dict[str, str]:
    """variable -> its default cell in docs/configuration.md's table."""
    rows = re.findall(r"^\| `(MNEMO_[A-Z0-9_]+)` \| ([^|]*) \|", text, flags=re.M)
    return {name: cell.strip() for name, cell in rows}


def test_documented_defaults_are_the_real_ones() -> None:
    cells = documented_defaults(DOCS.read_text(encoding="utf-8"))
    defaults = Settings()
    wrong = []
    for var in VARIABLES:
        if var.env in COMPUTED_DEFAULTS:
            continue
        cell, real = cells.get(var.env, "(missing)"), getattr(defaults, var.field)
        shown = re.match(r"`([^`]*)`", cell)
        if real is None:
            ok = cell.startswith("unset")
        elif shown is None:
            ok = False
        elif isinstance(real, bool):
            ok = parse_bool(var.env, shown.group(1)) == real
        elif isinstance(real, int | float):
            ok = float(shown.group(1)) == real
        else:
            ok = shown.group(1) == str(real)
        if not ok:
            wrong.append(f"{var.env}: documented {cell!r}, the default is {real!r}")
    assert not wrong, "docs/configuration.md shows wrong defaults:\n" + "\n".join(wrong)
