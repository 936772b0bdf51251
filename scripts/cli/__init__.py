"""The ``mnemo`` command line: a click group of nouns (groups) and verbs (commands).

Exit codes: ``scripts.cli.exit_codes`` (the table in docs/cli.md and README.md).
"""

from __future__ import annotations

from scripts.cli.app import main
from scripts.cli.backup import backup, restore, restore_drill
from scripts.cli.db import db
from scripts.cli.demo import demo
from scripts.cli.digest import digest
from scripts.cli.health import health
from scripts.cli.ingest import ingest
from scripts.cli.memory import memory
from scripts.cli.mirror import mirror
from scripts.cli.mirror_sync import reconcile_cmd as _reconcile  # noqa: F401 - registers
from scripts.cli.mirror_sync import sync as _sync  # noqa: F401 - registers the command
from scripts.cli.queue import queue
from scripts.cli.queue_verify import verify as _verify  # noqa: F401 - registers the command
from scripts.cli.recall import recall
from scripts.cli.schedules import schedules
from scripts.cli.tenant import tenant
from scripts.cli.worker import scheduler, up, worker

main.add_command(backup)
main.add_command(db)
main.add_command(demo)
main.add_command(digest)
main.add_command(health)
main.add_command(ingest)
main.add_command(memory)
main.add_command(mirror)
main.add_command(queue)
main.add_command(recall)
main.add_command(restore)
main.add_command(restore_drill)
main.add_command(scheduler)
main.add_command(schedules)
main.add_command(tenant)
main.add_command(up)
main.add_command(worker)

__all__ = ["main"]
