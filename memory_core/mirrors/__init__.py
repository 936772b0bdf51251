"""Mirrors: the change outbox in ``memory_state.db`` and its shipping to each sink, with a
per-sink cursor in ``memory_ops.db`` (``outbox``).

Imported by workers and operator commands; it imports the memory model and the shared base.
"""
