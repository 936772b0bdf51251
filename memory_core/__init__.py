"""mnemo's core: everything the chat process needs, and everything the workers run."""

from memory_core.chat.memory import Memory
from memory_core.recall import Budget, RecallResult, format_untrusted_block

__all__ = ["Budget", "Memory", "RecallResult", "format_untrusted_block"]
