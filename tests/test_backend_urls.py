"""Backend URLs: the strict grammar, canonical identities, no password anywhere, clients
built only from parsed parts, and libpq's environment refused (``memory_core.backends``)."""

from __future__ import annotations

import string
from typing import Any

import psycopg
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.backends import (
    KINDS,
    BackendURL,
    BackendURLError,
    libpq_environment,
    libpq_option_envvars,
    parse_backend_url,
    postgres_connect_kwargs,
)
from memory_core.brokers.redis import redis_client
from memory_core.errors import ConfigurationError
from memory_core.mirrors.postgres import PostgresSink
from memory_core.mirrors.sink import MirrorUnavailable
from memory_core.settings import Settings

VAR = {"postgres": "MNEMO_POSTGRES_URL", "redis": "MNEMO_BROKER_URL", "neo4j": "MNEMO_NEO4J_URL"}


@pytest.mark.parametrize("kind, raw, canonical", [
    ("postgres", "postgresql://mnemo@db.example.com/mnemo",
     "postgresql://mnemo@db.example.com:5432/mnemo"),
    ("postgres", " POSTGRES://Mnemo@DB.Example.COM:6543/my_db~1/ ",
     "postgresql://Mnemo@db.example.com:6543/my_db~1"),
    ("postgres", "postgresql://u@[2001:DB8:0:0::1]:5433/d", "postgresql://u@[2001:db8::1]:5433/d"),
    ("postgres", "postgresql://u@127.0.0.1/d", "postgresql://u@127.0.0.1:5432/d"),
    ("postgres", "postgresql://u@xn--bcher-kva.example/d", "postgresql://u@xn--bcher-kva.example:5432/d"),
    ("redis", "redis://cache", "redis://cache:6379/0"),
    ("redis", "rediss://app@cache:6380/15", "rediss://app@cache:6380/15"),
    ("redis", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("neo4j", "bolt://graph", "bolt://graph:7687"),
    ("neo4j", "NEO4J+S://Graph.example:7688/", "neo4j+s://graph.example:7688"),
])
def test_valid_urls_parse_to_their_canonical_form(kind: str, raw: str, canonical: str) -> None:
    url = parse_backend_url(kind, VAR[kind], raw)
    assert url.canonical == canonical
    assert parse_backend_url(kind, VAR[kind], canonical) == url  # a fixed point


@pytest.mark.parametrize("kind, raw, problem", [
    ("postgres", "postgresql://u:pw@h/d", "password"),
    ("postgres", "postgresql://:pw@h/d", "password"),
    ("postgres", "postgresql://h/d", "both the user and the database"),
    ("postgres", "postgresql://u@h", "both the user and the database"),
    ("postgres", "postgresql://u@h/d?sslmode=disable", "query"),
    ("postgres", "postgresql://u@h/d#x", "fragment"),
    ("postgres", "postgresql://u@%2Fvar%2Frun/d", "percent"),
    ("postgres", "postgresql://u@h1,h2/d", "second host"),
    ("postgres", "postgresql://u@/d", "no host"),
    ("postgres", "postgresql://u@h./d", "DNS name"),
    ("postgres", "postgresql://u@exa_mple/d", "DNS name"),
    ("postgres", "postgresql://u@example.123/d", "dotted-decimal"),
    ("postgres", "postgresql://u@0x7f.0.0.1/d", "dotted-decimal"),
    ("postgres", "postgresql://u@256.1.1.1/d", "dotted-decimal"),
    ("postgres", "postgresql://u@h:0/d", "port"),
    ("postgres", "postgresql://u@h:65536/d", "port"),
    ("postgres", "postgresql://u@h:54x/d", "port"),
    ("postgres", "postgresql://u@[fe80::1%eth0]/d", "percent"),
    ("postgres", "postgresql://u@[::1/d", "unclosed"),
    ("postgres", "postgresql://u@h/d/e", "database name"),
    ("postgres", "postgresql://u@h/d b", "space"),
    ("postgres", "postgresql://u@bücher.example/d", "non-ASCII"),
    ("postgres", "mysql://u@h/d", "postgresql://"),
    ("postgres", "postgresql://u\\x@h/d", "backslash"),
    ("redis", "redis://h/16", "0 to 15"),
    ("redis", "redis://h/x", "0 to 15"),
    ("redis", "redis://user:pw@h", "MNEMO_REDIS_PASSWORD"),
    ("neo4j", "bolt://neo4j@h", "MNEMO_NEO4J_USER"),
    ("neo4j", "bolt://h/db", "MNEMO_NEO4J_DATABASE"),
    ("neo4j", "http://h:7474", "bolt://"),
])
def test_refused_urls_name_the_problem_and_never_the_value(kind: str, raw: str,
                                                           problem: str) -> None:
    with pytest.raises(BackendURLError) as caught:
        parse_backend_url(kind, VAR[kind], raw)
    message = str(caught.value)
    assert VAR[kind] in message and problem in message
    assert raw.strip() not in message and "pw@" not in message
    assert KINDS[kind].example in message


# --- fuzzing -------------------------------------------------------------------------------

PASSWORD = st.text(alphabet=string.ascii_letters + string.digits + "!$&'()*+,;=-._~:@/?#[]%",
                   min_size=6, max_size=24).filter(lambda p: any(c.isalnum() for c in p))
ANY_TEXT = st.text(min_size=0, max_size=80)
URLISH = st.builds(lambda scheme, mid, tail: f"{scheme}://{mid}{tail}",
                   st.sampled_from(["postgresql", "postgres", "redis", "rediss", "bolt",
                                    "neo4j+s", "http", "POSTGRESQL"]),
                   st.text(alphabet=string.printable, max_size=40),
                   st.sampled_from(["", "/d", ":5432/d", "/0", "?x=1", "#f"]))


def _parse(kind: str, raw: str) -> BackendURL | None:
    try:
        return parse_backend_url(kind, VAR[kind], raw)
    except BackendURLError:
        return None


@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), raw=st.one_of(ANY_TEXT, URLISH))
def test_anything_parses_to_a_fixed_point_or_is_refused_cleanly(kind: str, raw: str) -> None:
    url = _parse(kind, raw)
    if url is None:
        return
    assert parse_backend_url(kind, VAR[kind], url.canonical) == url
    for part in (url.host, url.user or "", url.database or ""):
        assert all(c not in part for c in "@/?#%\\ ,") or (":" in url.host and part == url.host)
    assert url.user is None or ":" not in url.user


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), user=st.sampled_from(["", "u", "app.user"]),
       password=PASSWORD, host=st.sampled_from(["h", "db.example", "[::1]", "10.0.0.5"]),
       tail=st.sampled_from(["", "/d", ":5432/d", "/0"]))
def test_a_password_in_a_url_never_reaches_an_error_message(kind: str, user: str,
                                                            password: str, host: str,
                                                            tail: str) -> None:
    scheme = sorted(KINDS[kind].schemes)[0]
    raw = f"{scheme}://{user}:{password}@{host}{tail}"
    try:
        url = parse_backend_url(kind, VAR[kind], raw)
    except BackendURLError as e:
        assert password not in str(e) and raw not in str(e)
        return
    # Accepted only when the text after '//' up to '@' was not a password after all: the
    # grammar cut it differently (e.g. '@' inside the password); the password is not a part.
    assert password not in url.canonical


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(ANY_TEXT, URLISH))
def test_clients_are_built_only_from_parsed_parts(monkeypatch: pytest.MonkeyPatch,
                                                  raw: str) -> None:
    """Whatever the text, psycopg and redis-py only ever see keyword arguments made from a
    parsed URL: never a conninfo string, never a URL to parse."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def fake_connect(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        raise psycopg.OperationalError("stop here")

    monkeypatch.setattr(psycopg, "connect", fake_connect)
    monkeypatch.setattr(redis.Redis, "from_url", classmethod(
        lambda cls, *a, **k: pytest.fail("redis built from a URL string")))
    for kind in ("postgres", "redis"):
        url = _parse(kind, raw)
        if url is None:
            with pytest.raises(ConfigurationError):
                Settings.from_env({VAR[kind]: raw} if raw.strip() else {VAR[kind]: "x"})
            continue
        if kind == "postgres":
            with pytest.raises(MirrorUnavailable):
                PostgresSink(url, "secret-pw").open()
            args, kwargs = seen[-1]
            assert args == () and set(kwargs) <= {"host", "port", "dbname", "user", "password",
                                                  "connect_timeout", "application_name",
                                                  "passfile"}
            assert (kwargs["host"], kwargs["port"], kwargs["dbname"], kwargs["user"]) == (
                url.host, url.port, url.database, url.user)
        else:
            client = redis_client(url)
            pool_kwargs = client.connection_pool.connection_kwargs
            assert (pool_kwargs["host"], pool_kwargs["port"], pool_kwargs["db"]) == (
                url.host, url.port, int(url.database or 0))
            client.close()


@settings(max_examples=100, deadline=None)
@given(password=PASSWORD)
def test_a_mirror_error_never_carries_the_password(password: str) -> None:
    url = parse_backend_url("postgres", VAR["postgres"], "postgresql://u@127.0.0.1:9/d")
    with pytest.raises(MirrorUnavailable) as caught:
        PostgresSink(url, password, connect_timeout_s=1).open()
    with pytest.raises(MirrorUnavailable) as control:
        PostgresSink(url, "\x00none", connect_timeout_s=1).open()
    for shown, without in ((str(caught.value), str(control.value)),
                           (repr(caught.value), repr(control.value))):
        # A password that is a word of the message itself ("Mirror") is no leak: the same
        # text appears with another password.
        assert password not in shown or password in without
    # The driver's exception is not attached (raised "from None"): a traceback shows ours only.
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# --- libpq's environment -------------------------------------------------------------------

def test_the_libpq_variable_list_is_complete() -> None:
    names = libpq_option_envvars()
    for var in ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
                "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGSYSCONFDIR", "PGOPTIONS",
                "PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGGSSENCMODE",
                "PGTARGETSESSIONATTRS", "PGCONNECT_TIMEOUT", "PGAPPNAME", "PGREQUIREAUTH",
                "PGCHANNELBINDING", "PGKRBSRVNAME", "PGTZ", "PGDATESTYLE", "PGCLIENTENCODING"):
        assert var in names
    from psycopg import pq

    from_libpq = {o.envvar.decode() for o in pq.Conninfo.get_defaults() if o.envvar}
    assert from_libpq and from_libpq <= names  # what the loaded libpq reads is all covered


@pytest.mark.parametrize("var", sorted(libpq_option_envvars()))
def test_each_libpq_variable_refuses_a_postgres_connection(var: str) -> None:
    url = parse_backend_url("postgres", VAR["postgres"], "postgresql://u@h/d")
    with pytest.raises(BackendURLError) as caught:
        postgres_connect_kwargs(url, "pw", environ_names=[var, "HOME"])
    assert var in str(caught.value) and url.canonical in str(caught.value)


def test_the_check_reads_the_environment_at_connect_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGSERVICE", "value-never-shown")
    monkeypatch.setenv("PGHOST", "")  # empty: libpq ignores it too
    assert libpq_environment() == ["PGSERVICE"]
    url = parse_backend_url("postgres", VAR["postgres"], "postgresql://u@h/d")
    with pytest.raises(BackendURLError) as caught:
        postgres_connect_kwargs(url, None)
    assert "PGSERVICE" in str(caught.value) and "value-never-shown" not in str(caught.value)
    monkeypatch.delenv("PGSERVICE")
    kwargs = postgres_connect_kwargs(url, None)
    assert "password" not in kwargs and kwargs["passfile"].startswith("/dev/null/")


def test_neo4j_user_and_database_variables_use_the_name_grammar() -> None:
    s = Settings.from_env({"MNEMO_NEO4J_URL": "bolt://g", "MNEMO_NEO4J_USER": "app.user",
                           "MNEMO_NEO4J_DATABASE": "memory-1"})
    assert (s.neo4j_user, s.neo4j_database) == ("app.user", "memory-1")
    assert s.neo4j_backend is not None and s.neo4j_backend.canonical == "bolt://g:7687"
    for var, raw in (("MNEMO_NEO4J_USER", "neo4j:pw-shh"), ("MNEMO_NEO4J_DATABASE", "a b")):
        with pytest.raises(BackendURLError) as caught:
            Settings.from_env({"MNEMO_NEO4J_URL": "bolt://g", var: raw})
        assert var in str(caught.value) and raw not in str(caught.value)
