"""The task queue: two Dramatiq brokers (embedded SQLite, Redis), the spool and the factory.

Import the broker modules themselves only where they are used: the chat process on the
embedded default never loads the Redis client.
"""

from memory_core.brokers.base import DeadLetter, QueueAdmin, QueueStats
from memory_core.brokers.factory import (
    BrokerEnqueuer,
    Enqueuer,
    embedded_path,
    make_broker,
    make_enqueuer,
    make_relay,
)

__all__ = [
    "BrokerEnqueuer",
    "DeadLetter",
    "Enqueuer",
    "QueueAdmin",
    "QueueStats",
    "embedded_path",
    "make_broker",
    "make_enqueuer",
    "make_relay",
]
