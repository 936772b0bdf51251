"""Run the reconsolidation chain and SIGKILL this very process inside a transaction: after
the page's effects and its progress row are written, before COMMIT.

Usage: python -m tests.helpers.recon_killer DATA_DIR PARTITIONS KILL_AT_SAVE
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from memory_core.maintenance import partitions as parts
from memory_core.maintenance import reconsolidation
from tests.helpers.post_turn import make_context
from tests.helpers.recon import job_env, run_chain


def main() -> None:
    data_dir, partitions, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx = make_context(data_dir, (), recon_partitions=partitions, recon_batch=10)
    real = parts.save_progress
    calls = 0

    def save_then_die(conn: Any, *args: Any) -> None:
        nonlocal calls
        real(conn, *args)
        calls += 1
        if calls >= kill_at:
            assert conn.in_transaction  # the kill lands inside the page's transaction
            os.kill(os.getpid(), signal.SIGKILL)

    reconsolidation.save_progress = save_then_die  # type: ignore[assignment]
    run_chain(job_env(ctx), "r1")
    print("finished without being killed", flush=True)


if __name__ == "__main__":
    main()
