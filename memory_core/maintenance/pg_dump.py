"""A ``pg_dump`` of the Postgres mirror, taken with each backup when a mirror is configured.

The connection is built from the parsed URL's parts (``memory_core.backends``), with the same
refusal of libpq environment variables as the mirror's own connections. The password never
reaches the command line (other users can read it in ``ps``) nor the environment: it goes
into a private passfile. Error messages show the URL's canonical form, which has no password.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from psycopg.conninfo import make_conninfo

from memory_core.backends import BackendURL, postgres_connect_kwargs
from memory_core.maintenance.backup_files import BackupError

DUMP_FILE = "postgres.dump"
TIMEOUT_S = 2 * 3600  # a dump that has not finished in two hours is stuck, not slow


@contextlib.contextmanager
def _conninfo(url: BackendURL, password: str | None) -> Iterator[str]:
    """A conninfo built from ``url``'s parts; the password (if any) in a private passfile."""
    kwargs = postgres_connect_kwargs(url, None)
    if not password:
        yield make_conninfo(**kwargs)
        return
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    fd, name = tempfile.mkstemp(prefix="mnemo-pgpass-")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"*:*:*:*:{escaped}\n")
        yield make_conninfo(**{**kwargs, "passfile": name})
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def dump_postgres(url: BackendURL, password: str | None, dest: Path) -> None:
    """Dump the mirror database (custom format, ``pg_restore`` reads it) to ``dest``.

    Raises BackupError naming the canonical URL and the fix when pg_dump is missing or fails;
    BackendURLError while a libpq environment variable is set.
    """
    exe = shutil.which("pg_dump")
    if exe is None:
        raise BackupError(
            "MNEMO_POSTGRES_URL is set but pg_dump is not installed: install the PostgreSQL "
            "client (e.g. `apt-get install postgresql-client`) or unset MNEMO_POSTGRES_URL")
    shown = url.canonical
    with _conninfo(url, password) as dsn:
        try:
            done = subprocess.run(
                [exe, "--format=custom", "--no-password", f"--file={dest}", f"--dbname={dsn}"],
                capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise BackupError(f"pg_dump of {shown} did not finish within {TIMEOUT_S} s: check "
                              "the server and the network, then run `mnemo backup now`") from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        last = (lines[-1] if lines else "no message")[:300]
        if password:
            last = last.replace(password, "***")
        raise BackupError(f"pg_dump of {shown} failed (exit {done.returncode}: {last}): check "
                          "MNEMO_POSTGRES_URL and that the server is reachable; the backup "
                          "was not kept")
