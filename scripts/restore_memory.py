"""Restore a mnemo backup into a folder, for operators who do not use the `mnemo` command.

The same code as `mnemo restore` (checksums verified first; a folder that is not empty is
refused without --yes; --dry-run writes nothing). Example::

    python scripts/restore_memory.py latest --to /var/lib/mnemo-restored --dry-run
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file, not as an installed module
    sys.path.insert(0, str(REPO_ROOT))

from scripts.cli.backup import restore, standalone  # noqa: E402

if __name__ == "__main__":
    standalone(restore, "restore_memory.py")
