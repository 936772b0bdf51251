"""The extractor's rules have a version that changes whenever what they draw changes.

``mnemo memory status`` tells an operator which tenants hold beliefs drawn by older rules
(``memory_core.write.reextract.rules_drift``); that is only true if every change to what
the rules draw comes with a new ``RULES_VERSION``. This test is the detector: it digests
what the heuristic extractor draws from the probe texts (the case file, the LoCoMo
conversations: every speaker, and LongMemEval's user turns: real chat text) and compares it
with ``RULES_DIGEST``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from memory_core.extraction.heuristic import TurnText, extract_heuristic
from memory_core.extraction.version import RULES_DIGEST, RULES_VERSION

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "data" / "extraction_cases.jsonl"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
LONGMEMEVAL = REPO.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_dev48.json"
AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def probe_texts() -> list[tuple[str, str]]:
    """(speaker, text) of every case and every LoCoMo turn, in file order."""
    texts = [(c["speaker"], c["text"]) for c in map(json.loads, CASES.read_text().splitlines())]
    for conv in json.loads(LOCOMO.read_text(encoding="utf-8")):
        for key, session in sorted(conv["conversation"].items()):
            if key.startswith("session_") and isinstance(session, list):
                texts += [(t["speaker"], str(t.get("text", ""))) for t in session]
    for speaker in ("user", "assistant"):  # the same texts as the user's and the assistant's
        texts += [(speaker, text) for _, text in texts[:len(texts) // 4]]
    # LongMemEval's user turns (11,260 distinct): real chat with an assistant, long and
    # varied. Without them a rule change that only removed draws from such text (session
    # 21: "bought online", "likes the template") left the digest as it was.
    sessions = (s for q in json.loads(LONGMEMEVAL.read_text(encoding="utf-8"))
                for s in q["haystack_sessions"])
    users = dict.fromkeys(str(t["content"]) for s in sessions for t in s if t["role"] == "user")
    return texts + [("user", text) for text in users]


def rules_digest() -> str:
    digest = hashlib.sha256()
    for speaker, text in probe_texts():
        for c in extract_heuristic(TurnText(text, speaker, AT)):
            digest.update(repr((text, c.subject, c.predicate, c.object, c.negated, c.replaces,
                                c.valid_from, c.valid_to, c.confidence)).encode())
    return digest.hexdigest()[:24]


def test_what_the_rules_draw_changes_only_with_their_version() -> None:
    found = rules_digest()
    assert found == RULES_DIGEST, (
        f"the heuristic extractor draws differently from the rules named {RULES_VERSION!r} "
        f"(digest {found}, recorded {RULES_DIGEST!r}): give RULES_VERSION in "
        "memory_core/extraction/version.py a new value (stores extracted before it are then "
        "reported by `mnemo memory status` for `mnemo beliefs reextract`) and set "
        f"RULES_DIGEST = {found!r}")
