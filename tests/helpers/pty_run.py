"""Run a command with a real terminal (a pty) as its stderr, or as its stdout and stderr."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def run_in_pty(args: Sequence[str], *, cwd: Path, env: dict[str, str], stdout_too: bool = False,
               timeout: float = 120) -> tuple[str, str, int]:
    """(what the terminal showed, what went to the stdout pipe, exit code). With
    ``stdout_too`` stdout is the terminal as well (then the pipe text is empty)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(list(args), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=terminal if stdout_too else subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
    return seen.decode(errors="replace"), (out or b"").decode(), proc.returncode
