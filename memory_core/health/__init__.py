"""Health: named checks of the stores, the queue and the processes (``mnemo health``)."""

from memory_core.health.probe import probe
from memory_core.health.report import (
    DEGRADED,
    EXIT_CODES,
    OK,
    UNHEALTHY,
    Check,
    HealthEnv,
    overall,
    run_checks,
)

__all__ = ["DEGRADED", "EXIT_CODES", "OK", "UNHEALTHY", "Check", "HealthEnv", "overall",
           "probe", "run_checks"]
