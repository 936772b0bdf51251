"""Take one mnemo backup now, for cron users who do not run the scheduler.

The same code as `mnemo backup now` (and the scheduled ``backup`` job); configuration from
the MNEMO_* variables. Example crontab line (every 6 hours)::

    0 */6 * * * MNEMO_DATA_DIR=/var/lib/mnemo /opt/mnemo/.venv/bin/python \
        /opt/mnemo/scripts/backup_memory.py --json >> /var/log/mnemo-backup.log
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file, not as an installed module
    sys.path.insert(0, str(REPO_ROOT))

from scripts.cli.backup import now, standalone  # noqa: E402

if __name__ == "__main__":
    standalone(now, "backup_memory.py")
