"""mnemo's core: everything the chat process needs, and everything the workers run.

A package per concern: ``chat`` (``Memory``: recall and after_turn) and ``recall`` run in the
chat process; ``write`` (the post-turn write path), ``extraction``, ``maintenance`` (the
schedules' job bodies) and ``mirrors`` run in workers; ``model`` (the memory and its rules)
serves both; ``brokers``, ``embedders`` and ``db`` are the plug points and stores; the
modules at the top (settings, clock, errors, jobs, log, validate, vectors, status) are the
shared base. Imports only go down (``tests/test_layers.py``).
"""

from memory_core.chat.memory import Memory
from memory_core.recall import Budget, RecallResult, format_untrusted_block

__all__ = ["Budget", "Memory", "RecallResult", "format_untrusted_block"]
