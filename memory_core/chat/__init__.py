"""What the chat process holds: ``Memory`` (``recall`` and ``after_turn``) and the post-turn
sender that enqueues by job name.

It imports recall, the memory model's checks, brokers and the shared base; never ``write``,
``extraction``, ``workers`` or ``schedules``. ``memory_core`` re-exports ``Memory``.
"""
