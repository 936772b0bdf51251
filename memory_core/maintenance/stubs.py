"""Placeholders for the job bodies not built yet (integration branch only; never on main)."""

from __future__ import annotations

from memory_core.maintenance.base import JobEnv, JobReport


def _todo(name: str) -> JobReport:
    raise NotImplementedError(f"maintenance job {name} is not built yet")


def macro_sleep(env: JobEnv) -> JobReport:
    return _todo("macro_sleep")


def backup(env: JobEnv) -> JobReport:
    return _todo("backup")


def commitment_gc(env: JobEnv) -> JobReport:
    return _todo("commitment_gc")


def session_purge(env: JobEnv) -> JobReport:
    return _todo("session_purge")


def daily_digest(env: JobEnv) -> JobReport:
    return _todo("daily_digest")


def firing_ledger(env: JobEnv) -> JobReport:
    return _todo("firing_ledger")


def restore_drill(env: JobEnv) -> JobReport:
    return _todo("restore_drill")
