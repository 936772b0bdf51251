"""The state store's ``meta`` table (``memory_core.db.meta``), on a real state db."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.db import atomic, open_state
from memory_core.db.meta import get_meta, get_metas, meta_by_prefix, set_meta, set_meta_once
from memory_core.settings import Settings


def test_meta_values_set_once_replaced_and_read_by_prefix(tmp_path: Path) -> None:
    db = open_state(Settings.from_env({}, data_dir=tmp_path, log_level="error"))
    try:
        conn = db.conn
        with atomic(conn):
            set_meta(conn, "reextracted:acme", "v1")
            set_meta(conn, "reextracted:acme", "v2")  # replaced
            set_meta(conn, "reextracted_at:acme", "2026-12-02")  # another prefix
            set_meta(conn, "reextracted", "no colon")
            set_meta_once(conn, "extractor_rules:v2", "first")
            set_meta_once(conn, "extractor_rules:v2", "second")  # the first stays
        assert get_meta(conn, "reextracted:acme") == "v2"
        assert get_meta(conn, "missing") is None
        assert meta_by_prefix(conn, "reextracted:") == {"acme": "v2"}
        assert meta_by_prefix(conn, "reextracted_at:") == {"acme": "2026-12-02"}
        assert get_metas(conn, "extractor_rules:v2", "missing") == {"extractor_rules:v2": "first"}
        assert get_metas(conn) == {}
        with pytest.raises(ValueError, match="non-empty prefix"):
            meta_by_prefix(conn, "")
    finally:
        db.close()
