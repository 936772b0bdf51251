"""The ``mnemo`` command line: a click group of nouns (groups) and verbs (commands).

Exit codes: ``scripts.cli.exit_codes`` (the table in docs/cli.md and README.md).

Each command's module is imported when the command runs or shows its help, not before
(``MnemoGroup.add_lazy``), so `mnemo --help` and a light command do not load the worker
pool, the extractor or the model libraries. The summaries below are the first paragraph of
each command's help; ``tests/test_cli_startup.py`` keeps them equal.
"""

from __future__ import annotations

from scripts.cli.app import main

COMMANDS: dict[str, tuple[str, str]] = {
    "backup": ("scripts.cli.backup:backup",
               "Online backups of both databases, with per-tenant exports and a manifest."),
    "beliefs": ("scripts.cli.beliefs:beliefs",
                "What memory believes about a tenant: subject, predicate, object, when, from "
                "which turn."),
    "db": ("scripts.cli.db:db", "Schema versions and migrations of the two databases."),
    "demo": ("scripts.cli.demo:demo",
             "Run the whole pipeline on a small bundled conversation and show recall."),
    "digest": ("scripts.cli.digest:digest",
               "What memory learned, changed and dropped in a day, for one tenant."),
    "entities": ("scripts.cli.beliefs:entities",
                 "The entities memory knows for a tenant: people, places, things, with "
                 "aliases."),
    "health": ("scripts.cli.health:health",
               "Check memory, the queue and the processes; exit 0 healthy, 1 degraded, 2 "
               "unhealthy."),
    "ingest": ("scripts.cli.ingest:ingest",
               "Enqueue a file of turns for the workers, one JSON object per line."),
    "memory": ("scripts.cli.memory:memory",
               "Inspect memory and keep its vector index in step with the embedder."),
    # mirror_sync adds `sync` and `reconcile` to the mirror group when it is imported,
    # mirror_promote adds `promote`
    "mirror": ("scripts.cli.mirror_promote:mirror",
               "The mirrors (Postgres, Neo4j): how far behind each one is."),
    # queue_verify adds `mnemo queue verify` to the queue group when it is imported
    "queue": ("scripts.cli.queue_verify:queue",
              "The task queue: counts per queue, dead letters, requeue and purge."),
    "recall": ("scripts.cli.recall:recall",
               "Recall memory for QUERY: facts, then evidence, with handles, scores and "
               "turn pointers."),
    "restore": ("scripts.cli.backup:restore",
                "Restore BACKUP (a name from `mnemo backup list`, `latest`, or a backup "
                "folder's path) into the folder --to."),
    "restore-drill": ("scripts.cli.backup:restore_drill",
                      "Restore the latest backup into a scratch folder and check it: sha256, "
                      "PRAGMA integrity_check, schema versions and row counts against the "
                      "manifest."),
    "scheduler": ("scripts.cli.worker:scheduler",
                  "Run the scheduler only: the eight maintenance schedules, each firing only "
                  "enqueues."),
    "schedules": ("scripts.cli.schedules:schedules",
                  "The eight maintenance schedules: when they fire, how their windows went, "
                  "manual firing."),
    "tenant": ("scripts.cli.tenant:tenant",
               "Tenants: every memory belongs to exactly one; nothing crosses them."),
    "up": ("scripts.cli.worker:up",
           "Run everything a single machine needs: the worker pool and the scheduler (the "
           "eight maintenance schedules) on the configured broker, embedded by default. "
           "Migrates both databases first (as `mnemo db migrate`) and, like `mnemo worker`, "
           "refuses to start (exit 1) when the configured embedder differs from the one "
           "recorded for the data."),
    "worker": ("scripts.cli.worker:worker",
               "Run the worker pool: N processes x M threads consuming every queue."),
}

for _name, (_target, _summary) in COMMANDS.items():
    main.add_lazy(_name, _target, _summary)

__all__ = ["COMMANDS", "main"]
