"""Recall: the chat path's search over memory (re-exports only)."""

from memory_core.recall.fence import format_untrusted_block
from memory_core.recall.fusion import Budget
from memory_core.recall.result import RecallFact, RecallItem, RecallResult
from memory_core.recall.strategy import PRESETS, RecallStrategy, get_strategy

__all__ = ["PRESETS", "Budget", "RecallFact", "RecallItem", "RecallResult", "RecallStrategy",
           "format_untrusted_block", "get_strategy"]
