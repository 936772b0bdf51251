"""Health of the two SQLite files and of the vectors in them.

``PRAGMA quick_check`` reads every page (seconds per gigabyte): what it finds is a damaged
file, which no other check would notice until a write or a read hits the bad page.
"""

from __future__ import annotations

from pathlib import Path

from memory_core.db import migrations
from memory_core.db.sqlite import sqlite_module
from memory_core.embedders.factory import make_embedder
from memory_core.errors import MnemoError
from memory_core.health.report import DEGRADED, OK, UNHEALTHY, Check, HealthEnv
from memory_core.vectors import VectorIndex

_RESTORE = ("stop the workers, restore the latest backup (`mnemo restore`), and keep the "
            "damaged file for inspection")


def _database(env: HealthEnv, kind: str, path: Path) -> Check:
    name = f"{kind}_db"
    try:
        conn = env.conn(path, f"the {kind} database")
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        version = migrations.check_version(conn, kind, str(path))
    except sqlite_module().DatabaseError as e:
        return Check(name, UNHEALTHY, f"{path} is damaged ({type(e).__name__}: {e}): "
                     f"{_RESTORE}", {"path": str(path)})
    except MnemoError as e:
        return Check(name, UNHEALTHY, str(e), {"path": str(path)})
    detail = {"path": str(path), "schema_version": version}
    if rows != ["ok"]:
        return Check(name, UNHEALTHY, f"{path} fails PRAGMA quick_check ({'; '.join(rows[:3])}): "
                     f"{_RESTORE}", {**detail, "quick_check": rows[:20]})
    latest = migrations.latest_version(kind)
    if version < latest:
        return Check(name, UNHEALTHY, f"{path} has schema version {version}, this mnemo needs "
                     f"{latest}: run `mnemo db migrate` or start the workers", detail)
    return Check(name, OK, f"quick_check ok, schema version {version}", detail)


def check_state_db(env: HealthEnv) -> Check:
    return _database(env, "state", env.settings.state_db_path)


def check_ops_db(env: HealthEnv) -> Check:
    return _database(env, "ops", env.settings.ops_db_path)


def check_embedder(env: HealthEnv) -> Check:
    """The embedder recorded for the data against the configured one (MNEMO_EMBEDDER...)."""
    index = VectorIndex(make_embedder(env.settings))  # a model that cannot load raises
    st = index.state(env.state)
    detail = {"recorded": st.recorded_identity, "configured": st.active_identity}
    if st.recorded_identity is None:
        return Check("embedder", OK, f"no vectors yet; {st.active_identity} will be recorded "
                     "by the first write", detail)
    if not st.match:
        return Check("embedder", UNHEALTHY,
                     f"the data's vectors were made by {st.recorded_identity} but the "
                     f"configured embedder is {st.active_identity}: set MNEMO_EMBEDDER / "
                     "MNEMO_EMBED_MODEL to the recorded one, or run `mnemo memory reindex` "
                     "to rebuild the vectors with the configured one", detail)
    if st.reindex_target is not None:
        return Check("embedder", DEGRADED, "a reindex is under way: run `mnemo memory "
                     "reindex` again to finish it", detail)
    return Check("embedder", OK, f"{st.active_identity} matches the data", detail)
