"""Re-extraction on the Postgres primary: the same plan and outcome as on SQLite
(``tests/test_reextract.py``): the assistant's city read as the user's by an older release
is invalidated, the job title it missed is added, and a second run changes nothing."""

from __future__ import annotations

from memory_core.db.pg_store import PgDatabase
from memory_core.model.turns import TurnInput
from memory_core.write.pipeline import anchor_turn, micro_consolidate, process_turn
from memory_core.write.reextract import note_rules, reextract, rules_drift
from tests.helpers.primary import make_pg_store, rows
from tests.test_reextract import older_rules, turns


def test_reextract_on_the_primary_matches_sqlite(primary_urls) -> None:
    db = PgDatabase(primary_urls[0], None)
    db.migrate()
    try:
        store = make_pg_store(db.url, ("t1", "t2"), db=db)
        for tenant in ("t1", "t2"):
            for t in turns(tenant):
                process_turn(store.db, store.index, TurnInput.from_dict(t),
                             extractor=older_rules)
                anchor_turn(store.db, store.index, tenant, t["turn_uid"])
                micro_consolidate(store.db, store.index, tenant, "s1", turn_uid=t["turn_uid"])

        def current(tenant: str, predicate: str) -> set[str]:
            return {r[0] for r in rows(store.db, (
                "SELECT object_text FROM beliefs WHERE tenant = ? AND predicate = ? AND "
                "status = 'active' AND negated = 0 AND valid_to IS NULL"), (tenant, predicate))}

        assert current("t1", "lives_in") == {"Austin"}
        note_rules(store.db.conn)  # an upgraded worker starts
        assert rules_drift(store.db.conn).behind == {"t1": 6, "t2": 6}
        report = reextract(store.db, store.index, "t1")
        assert rules_drift(store.db.conn).behind == {"t2": 6}
        assert current("t1", "lives_in") == {"Boston"}
        assert current("t1", "job_title_is") == {"data analyst"}
        assert current("t2", "lives_in") == {"Austin"}  # another tenant: untouched
        assert {(c.predicate, c.object_text) for c in report.invalidated} == {
            ("lives_in", "Austin"), ("prefers", "sweet food"), ("likes", "mild food")}
        again = reextract(store.db, store.index, "t1")
        assert (again.added, again.invalidated) == ([], [])
    finally:
        db.close()
