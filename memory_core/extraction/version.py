"""Which rules the heuristic extractor runs: a name for them, and the digest of what they
draw on the probe texts (``tests/test_extractor_version.py``).

Beliefs are drawn once per turn, so a store keeps what the rules of its day drew. Workers
record when they first ran ``RULES_VERSION`` (``memory_core.write.reextract.note_rules``);
``mnemo memory status`` then names the tenants whose turns were extracted before it, for
``mnemo beliefs reextract``. When the rules draw anything differently, the test fails until
``RULES_VERSION`` is given a new value and ``RULES_DIGEST`` the new digest it prints.
"""

from __future__ import annotations

RULES_VERSION = "2026-12-03.23"
RULES_DIGEST = "571de37884f13370214794f7"
# A worker's heartbeat names the rules it runs (``detail[HEARTBEAT_RULES]``): during a
# rolling upgrade, workers of the older release still extract after the first new one has
# started, and ``rules_drift`` counts their turns too.
HEARTBEAT_RULES = "extractor_rules"
