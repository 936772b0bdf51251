"""``mnemo demo`` right after install: no server, a clean environment, exit 0, recalled text."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_mnemo_demo_runs_the_pipeline_and_recalls(tmp_path: Path) -> None:
    mnemo = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    out = subprocess.run([mnemo, "demo"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "30 turns" in out.stdout
    answers = out.stdout.split("Q: ")[1:]
    assert len(answers) == 4
    assert "Denver" in answers[0]  # where the user lives now
    # ... as the first fact, naming the city it replaced; then the evidence
    first = answers[0].split("\n")[1:3]
    assert first == ["   facts:", "   [1] fact: Maya Lindqvist lives in Denver (before: Portland)"]
    facts = answers[0].split("   evidence:")[0]
    assert "Stockholm" not in facts  # the sister's city does not answer it
    assert "Biscuit" in answers[1]  # the dog's name
    assert "Greenline Studio" in answers[3]  # as of March: the job before the move
    assert "from turn(s) demo-" in out.stdout  # items point back to their turns
    assert not list(tmp_path.glob(".local/share/mnemo/*"))  # the real data dir untouched


@pytest.mark.slow
def test_mnemo_demo_json_is_one_document_on_stdout(tmp_path: Path) -> None:
    mnemo = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    out = subprocess.run([mnemo, "demo", "--json", "--processes", "1"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["turns"] == 30 and report["counts"]["turns"] == 30
    assert len(report["questions"]) == 4
    assert report["questions"][0]["question"] == "Which city do I live in now?"
    first = report["questions"][0]["recall"]["facts"][0]
    assert (first["subject"], first["predicate"], first["object"]) == (
        "Maya Lindqvist", "lives_in", "Denver")
    assert "mnemo demo:" not in out.stderr  # no progress lines with --json
