"""Health of the two SQLite files and of the vectors in them.

A database's state is ``memory_core.db.faults.storage_status``'s, the same one the workers'
StorageGuard pauses on and the CLI's exit code 4 reports: ``ok``, ``readonly``, ``full``,
``damaged`` (it fails ``PRAGMA quick_check``, which reads every page: seconds per gigabyte)
or ``missing``; anything but ``ok`` is unhealthy, with the same fix. An ``ok`` file then has
its schema version checked. The embedder check words a mismatch as the refusing worker does
(``memory_core.embedders.identity.mismatch_message``).
"""

from __future__ import annotations

from typing import Any

from memory_core.db import migrations
from memory_core.db.faults import StorageStatus, storage_status
from memory_core.embedders.factory import make_embedder
from memory_core.embedders.identity import mismatch_message
from memory_core.health.report import DEGRADED, OK, UNHEALTHY, Check, HealthEnv
from memory_core.vectors import VectorIndex

_STATES = {"damaged": "is damaged", "readonly": "cannot be written",
           "full": "cannot be written, the disk is full", "missing": "does not exist"}


def _statuses(env: HealthEnv) -> dict[str, StorageStatus]:
    """Both databases probed once per report (a quick_check each)."""
    if "storage" not in env.cache:
        env.cache["storage"] = storage_status(env.settings)
    found: dict[str, StorageStatus] = env.cache["storage"]
    return found


def _database(env: HealthEnv, kind: str) -> Check:
    name = f"{kind}_db"
    status = _statuses(env)[kind]
    path = status.path
    detail: dict[str, Any] = {"path": str(path), "state": status.state}
    if not status.ok:
        what = _STATES.get(status.state, status.state)
        workers = "" if status.state == "missing" else "; workers pause until it is fixed"
        return Check(name, UNHEALTHY, f"{path} {what} ({status.detail}){workers}: "
                     f"{status.fix}", detail)
    version = migrations.check_version(env.conn(path, f"the {kind} database"), kind, str(path))
    detail["schema_version"] = version
    latest = migrations.latest_version(kind)
    if version < latest:
        return Check(name, UNHEALTHY, f"{path} has schema version {version}, this mnemo needs "
                     f"{latest}: run `mnemo db migrate` or start the workers", detail)
    return Check(name, OK, f"quick_check ok, writable, schema version {version}", detail)


def check_state_db(env: HealthEnv) -> Check:
    if env.settings.state_backend == "postgres":
        return _primary(env)
    return _database(env, "state")


def _primary(env: HealthEnv) -> Check:
    """The Postgres primary: reachable, and its schema is this code's."""
    from memory_core.db.primary import open_primary
    from memory_core.errors import StoreError

    try:
        db = open_primary(env.settings, migrate=False, readonly=True)
    except StoreError as e:
        return Check("state_db", UNHEALTHY, str(e), {"backend": "postgres"})
    try:
        version = db.version()
    finally:
        db.close()
    return Check("state_db", OK, f"Postgres primary reachable, schema version {version}",
                 {"backend": "postgres", "url": str(env.settings.postgres_url),
                  "schema_version": version})


def check_ops_db(env: HealthEnv) -> Check:
    return _database(env, "ops")


def check_embedder(env: HealthEnv) -> Check:
    """The embedder recorded for the data against the configured one (MNEMO_EMBEDDER...),
    then rows with no vector (dense search misses them until `mnemo memory reindex`)."""
    index = VectorIndex(make_embedder(env.settings))  # a model that cannot load raises
    st = index.state(env.state)
    detail: dict[str, Any] = {"recorded": st.recorded_identity,
                              "configured": st.active_identity}
    if st.recorded_identity is None:
        return Check("embedder", OK, f"no vectors yet; {st.active_identity} will be recorded "
                     "by the first write", detail)
    if not st.match:
        where = f"the data in {env.settings.state_db_path}"
        return Check("embedder", UNHEALTHY, "a worker with these settings would refuse: "
                     + mismatch_message(st.recorded_identity, st.active_identity, where), detail)
    if st.reindex_target is not None:
        return Check("embedder", DEGRADED, "a reindex is under way: run `mnemo memory "
                     "reindex` again to finish it", detail)
    missing = {k: n for k, n in (index.missing(env.state) or {}).items() if n}
    detail["missing"] = missing
    if missing:
        listed = ", ".join(f"{k} {n}" for k, n in sorted(missing.items()))
        return Check("embedder", DEGRADED,
                     f"{sum(missing.values())} row(s) have no vector ({listed}): dense search "
                     "does not find them; run `mnemo memory reindex` to fill them", detail)
    return Check("embedder", OK, f"{st.active_identity} matches the data", detail)
