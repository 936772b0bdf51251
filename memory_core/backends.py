"""Backend URLs (Postgres, Redis, Neo4j): one strict grammar, clients built from its parts.

A backend URL is configuration, shown in status output and recorded as the backend's
identity, so it may carry nothing secret: passwords come from their own variables
(``MNEMO_POSTGRES_PASSWORD``, ``MNEMO_REDIS_PASSWORD``, ``MNEMO_NEO4J_PASSWORD``). The grammar
admits only parts that cannot carry a secret::

    scheme://[user@]host[:port][/database]

- host: a DNS name (ASCII labels of letters, digits and hyphens, no dot at the end; an
  international name in its ``xn--`` form), an IPv4 address in dotted decimal, or an IPv6
  address in brackets; a name whose last label is all digits must be a dotted-decimal IPv4;
- port: 1-65535, or none (the scheme's default is then dialled and recorded);
- user and database: letters, digits, ``.``, ``_``, ``-`` (a database also ``~``), at most 63
  characters; Redis's database is a number 0-15 and Neo4j's comes from
  ``MNEMO_NEO4J_DATABASE`` (a path is refused), as does its user (``MNEMO_NEO4J_USER``);
- nothing else: no password, query, fragment, percent-encoding, space or control character,
  no second host, no Unix socket. Spaces around the whole value are ignored.

A refused value raises ``BackendURLError`` naming the variable, what is wrong and the form to
use; the message never repeats the value. Every client (psycopg, redis-py, the neo4j driver)
is built from a ``BackendURL``'s parts — psycopg through ``postgres_connect_kwargs`` — never
from the text as entered; ``canonical`` (lower-case scheme and host, IPv6 in its short form,
the port dialled) is the identity that status output, logs and errors show.

libpq fills every connection setting it is not given from ``PG*`` environment variables and a
service file, so ``postgres_connect_kwargs`` refuses while one of them is set
(``libpq_environment``), naming the variables, never their values.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memory_core.errors import ConfigurationError


class BackendURLError(ConfigurationError):
    """A backend URL outside the grammar (the message never repeats the value)."""


@dataclass(frozen=True)
class _Kind:
    name: str  # postgres | redis | neo4j
    schemes: dict[str, str]  # as written -> canonical
    default_port: int
    password_var: str
    user_in_url: bool
    database: str  # "name" | "number" | "none"
    example: str


KINDS: dict[str, _Kind] = {
    "postgres": _Kind("postgres", {"postgresql": "postgresql", "postgres": "postgresql"}, 5432,
                      "MNEMO_POSTGRES_PASSWORD", True, "name",
                      "postgresql://USER@HOST:5432/DATABASE"),
    "redis": _Kind("redis", {"redis": "redis", "rediss": "rediss"}, 6379,
                   "MNEMO_REDIS_PASSWORD", True, "number", "redis://HOST:6379/0"),
    "neo4j": _Kind("neo4j", {s: s for s in ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s",
                                            "neo4j+ssc")}, 7687, "MNEMO_NEO4J_PASSWORD",
                   False, "none", "bolt://HOST:7687"),
}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+]{0,15})://")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,63}$")
_DBNAME = re.compile(r"^[A-Za-z0-9._~-]{1,63}$")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_PORT = re.compile(r"^[0-9]{1,5}$")


@dataclass(frozen=True)
class BackendURL:
    """A parsed backend URL: the only thing clients are built from. No password in it."""

    kind: str  # postgres | redis | neo4j
    scheme: str  # canonical (postgres -> postgresql)
    host: str  # lower case; IPv6 without brackets, in its short form
    port: int  # the port dialled (the scheme's default when the URL names none)
    user: str | None
    database: str | None  # Postgres: the name; Redis: the number as text; Neo4j: None

    @property
    def host_for_url(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def canonical(self) -> str:
        """The identity shown and recorded: ``scheme://[user@]host:port[/database]``."""
        user = f"{self.user}@" if self.user else ""
        db = f"/{self.database}" if self.database is not None else ""
        return f"{self.scheme}://{user}{self.host_for_url}:{self.port}{db}"

    def __str__(self) -> str:
        return self.canonical


def _refuse(var: str, what: str, kind: _Kind) -> BackendURLError:
    return BackendURLError(
        f"{var} {what}: use the form {kind.example} (host, port, user and database names "
        f"only; the password goes in {kind.password_var}). The value is not shown.")


def _host(var: str, text: str, kind: _Kind) -> str:
    if text.startswith("["):
        if not text.endswith("]"):
            raise _refuse(var, "has an unclosed '[' around its IPv6 host", kind)
        inner = text[1:-1]
        if not re.fullmatch(r"[0-9A-Fa-f:.]{2,45}", inner):
            raise _refuse(var, "has an IPv6 host with characters other than hex digits, ':' "
                          "and '.' (no zone id)", kind)
        try:
            return ipaddress.IPv6Address(inner).compressed
        except ValueError:
            raise _refuse(var, "has an invalid IPv6 address", kind) from None
    if not text:
        raise _refuse(var, "has no host", kind)
    labels = text.split(".")
    if len(text) > 253 or not all(_LABEL.match(label) for label in labels):
        raise _refuse(var, "has a host that is not an ASCII DNS name (letters, digits and "
                      "hyphens between dots, no dot at the end; an international name in its "
                      "xn-- form), a dotted-decimal IPv4 address or an IPv6 address in "
                      "brackets", kind)
    if labels[-1].isdigit() and (len(labels) != 4 or not all(
            p.isdigit() and len(p) <= 3 and int(p) <= 255 and (p == "0" or not p.startswith("0"))
            for p in labels)):
        raise _refuse(var, "has a host whose last part is a number but is not a "
                          "dotted-decimal IPv4 address", kind)
    return text.lower()


def parse_name(var: str, raw: str) -> str:
    """A user or database name given in its own variable (``MNEMO_NEO4J_USER``,
    ``MNEMO_NEO4J_DATABASE``): the URL grammar's names."""
    value = raw.strip()
    if not _NAME.match(value):
        raise BackendURLError(f"{var} must be 1-63 letters, digits, '.', '_' or '-'; the value "
                              "is not shown")
    return value


def parse_backend_url(kind_name: str, var: str, raw: str) -> BackendURL:
    """Parse ``raw`` (the value of variable ``var``) as a ``kind_name`` backend URL.

    Raises BackendURLError naming ``var``, the problem and the form; never quoting ``raw``.
    """
    kind = KINDS[kind_name]
    text = raw.strip()
    if not text:
        raise _refuse(var, "is empty", kind)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 or ord(c) > 126 for c in text):
        raise _refuse(var, "contains a space, a control character or a non-ASCII character",
                      kind)
    m = _SCHEME.match(text)
    if not m or m.group(1).lower() not in kind.schemes:
        raise _refuse(var, "must start with one of: "
                      + ", ".join(f"{s}://" for s in kind.schemes), kind)
    scheme = kind.schemes[m.group(1).lower()]
    rest = text[m.end():]
    for char, what in (("?", "a query"), ("#", "a fragment"), ("%", "percent-encoding"),
                       ("\\", "a backslash"), (",", "a second host")):
        if char in rest:
            raise _refuse(var, f"contains {what}", kind)
    authority, slash, path = rest.partition("/")
    user: str | None = None
    if "@" in authority:
        userinfo, _, authority = authority.rpartition("@")
        if ":" in userinfo or "@" in userinfo:
            raise _refuse(var, "contains a password: remove it from the URL and set "
                          f"{kind.password_var} instead (then rotate it: it was stored in "
                          "plain configuration)", kind)
        if not kind.user_in_url:
            raise _refuse(var, "names a user: set MNEMO_NEO4J_USER instead", kind)
        if not _NAME.match(userinfo):
            raise _refuse(var, "has a user name outside letters, digits, '.', '_' and '-'",
                          kind)
        user = userinfo
    port = kind.default_port
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _refuse(var, "has an unclosed '[' around its IPv6 host", kind)
        host_text, port_text = authority[:end + 1], authority[end + 1:]
        if port_text and not port_text.startswith(":"):
            raise _refuse(var, "has text after its IPv6 host", kind)
        port_text = port_text[1:] if port_text else ""
        has_port = bool(port_text) or authority.endswith(":")
    else:
        host_text, colon, port_text = authority.partition(":")
        has_port = bool(colon)
    if has_port:
        if not _PORT.match(port_text) or not 1 <= int(port_text) <= 65535:
            raise _refuse(var, "has a port that is not a number from 1 to 65535", kind)
        port = int(port_text)
    host = _host(var, host_text, kind)
    database = _database(var, kind, path, bool(slash))
    if kind.name == "postgres" and (user is None or database is None):
        raise _refuse(var, "must name both the user and the database (libpq would otherwise "
                      "pick them from the environment)", kind)
    return BackendURL(kind.name, scheme, host, port, user, database)


def _database(var: str, kind: _Kind, path: str, slash: bool) -> str | None:
    if path.endswith("/"):
        path = path[:-1]
    if not path:
        return "0" if kind.database == "number" else None
    if kind.database == "none":
        raise _refuse(var, "has a path: the database comes from MNEMO_NEO4J_DATABASE", kind)
    if kind.database == "number":
        if not re.fullmatch(r"[0-9]{1,2}", path) or int(path) > 15:
            raise _refuse(var, "has a database that is not a number from 0 to 15", kind)
        return str(int(path))
    if not _DBNAME.match(path):
        raise _refuse(var, "has a database name outside letters, digits, '.', '_', '~' and "
                      "'-' (one name, no second '/')", kind)
    return path


NO_PASSFILE = "/dev/null/mnemo-reads-no-passfile"

# --- libpq's environment ------------------------------------------------------------------

# Variables libpq reads besides the connection options it reports (``libpq_option_envvars``):
# where it looks for service and system files, and session defaults it sends.
_LIBPQ_EXTRA = ("PGSERVICEFILE", "PGSYSCONFDIR", "PGLOCALEDIR", "PGDATESTYLE", "PGTZ",
                "PGGEQO", "PGCLIENTENCODING", "PGREQUIRESSL", "PGOAUTHDEBUG")
# The connection options' variables of libpq 18, used when the loaded library cannot be asked.
_LIBPQ_KNOWN = (
    "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE",
    "PGREQUIREAUTH", "PGCHANNELBINDING", "PGSERVICE", "PGOPTIONS", "PGAPPNAME", "PGSSLMODE",
    "PGSSLNEGOTIATION", "PGSSLCOMPRESSION", "PGSSLCERT", "PGSSLKEY", "PGSSLCERTMODE",
    "PGSSLROOTCERT", "PGSSLCRL", "PGSSLCRLDIR", "PGSSLSNI", "PGREQUIREPEER",
    "PGSSLMINPROTOCOLVERSION", "PGSSLMAXPROTOCOLVERSION", "PGMINPROTOCOLVERSION",
    "PGMAXPROTOCOLVERSION", "PGGSSENCMODE", "PGKRBSRVNAME", "PGGSSLIB", "PGGSSDELEGATION",
    "PGCONNECT_TIMEOUT", "PGTARGETSESSIONATTRS", "PGLOADBALANCEHOSTS", "PGSSLKEYLOGFILE",
)


def libpq_option_envvars() -> frozenset[str]:
    """Every environment variable the loaded libpq reads for a connection option (asked of
    the library itself, so a variable a later libpq adds is covered), plus the files and
    session variables it reads outside its options."""
    names = set(_LIBPQ_KNOWN) | set(_LIBPQ_EXTRA)
    try:
        from psycopg import pq

        for option in pq.Conninfo.get_defaults():
            if option.envvar:
                names.add(option.envvar.decode())
    except Exception:  # psycopg absent or its libpq unreadable: the built-in list stands
        pass
    return frozenset(names)


def libpq_environment(names: Iterable[str] | None = None) -> list[str]:
    """The libpq variables among ``names`` — by default the names of this process's
    non-empty environment variables *now* (``settings.environment_names``): libpq reads them
    when it connects, whatever the Settings saw when they were built."""
    if names is None:
        from memory_core.settings import environment_names  # settings imports this module

        names = environment_names()
    return sorted(set(names) & libpq_option_envvars())


def postgres_connect_kwargs(url: BackendURL, password: str | None, *,
                            connect_timeout_s: int = 5,
                            environ_names: Iterable[str] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``psycopg.connect`` built from ``url``'s parts.

    Raises BackendURLError while a libpq variable is set that would change where the
    connection goes, as whom or with what trust (the variables named, never their values).
    """
    if url.kind != "postgres":
        raise ValueError("postgres_connect_kwargs needs a postgres URL")
    found = libpq_environment(environ_names)
    if found:
        raise BackendURLError(
            f"refusing to connect to Postgres at {url.canonical}: the libpq environment "
            f"variable(s) {', '.join(found)} would change where or how it connects; unset "
            "them for mnemo (the URL and MNEMO_POSTGRES_PASSWORD say everything it needs)")
    kwargs: dict[str, Any] = {
        "host": url.host, "port": url.port, "dbname": url.database, "user": url.user,
        "connect_timeout": connect_timeout_s, "application_name": "mnemo",
        # No password file (a path that cannot exist, so libpq reads none and says nothing):
        # the password comes from MNEMO_POSTGRES_PASSWORD or not at all.
        "passfile": NO_PASSFILE,
    }
    if password:
        kwargs["password"] = password
    return kwargs


def redis_client_kwargs(url: BackendURL, password: str | None) -> dict[str, Any]:
    """Keyword arguments for ``redis.Redis`` built from ``url``'s parts."""
    if url.kind != "redis":
        raise ValueError("redis_client_kwargs needs a redis URL")
    kwargs: dict[str, Any] = {"host": url.host, "port": url.port, "db": int(url.database or 0),
                              "ssl": url.scheme == "rediss"}
    if url.user:
        kwargs["username"] = url.user
    if password:
        kwargs["password"] = password
    return kwargs
