"""Placeholders for the job bodies not built yet (integration branch only; never on main)."""

from __future__ import annotations

from memory_core.maintenance.base import JobEnv, JobReport


def _todo(name: str) -> JobReport:
    raise NotImplementedError(f"maintenance job {name} is not built yet")


def global_reconsolidation(env: JobEnv, *, run_id: str, partition: int,
                           partitions: int) -> JobReport:
    return _todo("global_reconsolidation")
