"""Compare the mirrors (Postgres, Neo4j) with the memory's source of truth and repair them.

The same code as `mnemo mirror reconcile`: ``--dry-run`` reports dead facts still live in a
mirror, missing facts and stale versions; without it they are repaired. ``--sink
postgres|neo4j``, ``--tenant T``, ``--json``, ``--quiet`` (no progress on stderr). Exit 0
clean, 1 drift, 2 error. Run it (clean) before making Postgres the primary store. Example::

    MNEMO_DATA_DIR=/var/lib/mnemo python scripts/reconcile_memory_mirror.py --dry-run --json
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file, not as an installed module
    sys.path.insert(0, str(REPO_ROOT))

from scripts.cli.backup import standalone  # noqa: E402
from scripts.cli.mirror_sync import reconcile_cmd  # noqa: E402

if __name__ == "__main__":
    standalone(reconcile_cmd, "reconcile_memory_mirror.py")
