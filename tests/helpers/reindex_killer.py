"""Run a reindex and SIGKILL this very process after a number of committed batches.

Usage: python -m tests.helpers.reindex_killer DATA_DIR HASH_DIM KILL_AFTER_BATCHES
"""

from __future__ import annotations

import os
import signal
import sys

from memory_core.db import open_state
from memory_core.embedders import HashEmbedder
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex


def main() -> None:
    data_dir, dim, kill_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    db = open_state(Settings.from_env({}, data_dir=data_dir))
    batches = 0

    def progress(base: str, done: int, total: int) -> None:
        nonlocal batches
        batches += 1
        if batches >= kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    VectorIndex(HashEmbedder(dim=dim)).reindex(db.conn, batch_size=10, progress=progress)


if __name__ == "__main__":
    main()
