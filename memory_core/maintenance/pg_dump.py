"""A ``pg_dump`` of the Postgres mirror, taken with each backup when a mirror is configured.

The password never reaches the command line (other users can read it in ``ps``) nor the
environment: it goes into a private passfile named by the connection string. Error
messages show the URL with its password replaced by ``***``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from memory_core.maintenance.backup_files import BackupError
from memory_core.settings import redact_url

DUMP_FILE = "postgres.dump"
TIMEOUT_S = 2 * 3600  # a dump that has not finished in two hours is stuck, not slow


@contextlib.contextmanager
def _dsn(url: str) -> Iterator[str]:
    """``url`` without its password, plus ``passfile=`` naming a private file that holds it."""
    parts = urlsplit(url)
    if parts.password is None:
        yield url
        return
    host = parts.hostname or ""
    netloc = (f"{parts.username or ''}@" + (f"[{host}]" if ":" in host else host)
              + (f":{parts.port}" if parts.port else ""))
    password = unquote(parts.password).replace("\\", "\\\\").replace(":", "\\:")
    fd, name = tempfile.mkstemp(prefix="mnemo-pgpass-")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"*:*:*:*:{password}\n")
        query = "&".join(q for q in (parts.query, f"passfile={name}") if q)
        yield urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def dump_postgres(url: str, dest: Path) -> None:
    """Dump the mirror database (custom format, ``pg_restore`` reads it) to ``dest``.

    Raises BackupError naming the redacted URL and the fix when pg_dump is missing or fails.
    """
    exe = shutil.which("pg_dump")
    if exe is None:
        raise BackupError(
            "MNEMO_POSTGRES_URL is set but pg_dump is not installed: install the PostgreSQL "
            "client (e.g. `apt-get install postgresql-client`) or unset MNEMO_POSTGRES_URL")
    shown = redact_url(url)
    with _dsn(url) as dsn:
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
        raise BackupError(f"pg_dump of {shown} failed (exit {done.returncode}: {last}): check "
                          "MNEMO_POSTGRES_URL and that the server is reachable; the backup "
                          "was not kept")
