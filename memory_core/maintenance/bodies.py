"""The eight job bodies by job name: what the maintenance actors call."""

from __future__ import annotations

from collections.abc import Callable

from memory_core.maintenance.backup import backup
from memory_core.maintenance.base import JobReport
from memory_core.maintenance.commitments import commitment_gc
from memory_core.maintenance.digest import daily_digest
from memory_core.maintenance.drill import restore_drill
from memory_core.maintenance.ledger import firing_ledger
from memory_core.maintenance.purge import session_purge
from memory_core.maintenance.reconsolidation import global_reconsolidation
from memory_core.maintenance.sleep import macro_sleep

BODIES: dict[str, Callable[..., JobReport]] = {
    "macro_sleep": macro_sleep,
    "backup": backup,
    "global_reconsolidation": global_reconsolidation,
    "commitment_gc": commitment_gc,
    "session_purge": session_purge,
    "daily_digest": daily_digest,
    "firing_ledger": firing_ledger,
    "restore_drill": restore_drill,
}
