"""The embedded broker's SQL, named and parameterised (table ``queue_messages``).

Times are epoch seconds. States: ``ready`` (deliverable once ``eta`` has passed), ``leased``
(delivered to ``lease_owner`` until ``lease_expires_at``), ``dead`` (a dead letter). A
delivery is named by (id, attempts, lease_owner): ack, nack and release only touch the row
while that delivery still holds it.
"""

from __future__ import annotations

# Insert, or re-arm a leased row (Retries re-enqueues the message it is processing); a
# waiting or dead row with the same message id is left alone.
ENQUEUE = """
INSERT INTO queue_messages (message_id, queue_name, actor_name, body, state, eta, enqueued_at)
VALUES (?, ?, ?, ?, 'ready', ?, ?)
ON CONFLICT (message_id) DO UPDATE SET
    queue_name = excluded.queue_name, actor_name = excluded.actor_name,
    body = excluded.body, state = 'ready', eta = excluded.eta,
    lease_owner = NULL, lease_expires_at = NULL
WHERE queue_messages.state = 'leased'
"""

# Insert unless the message id is already stored, in any state (a sender's duplicate: a
# waiting copy is enough, a leased one is being worked on, a dead one waits for an operator).
ENQUEUE_ONCE = """
INSERT INTO queue_messages (message_id, queue_name, actor_name, body, state, eta, enqueued_at)
VALUES (?, ?, ?, ?, 'ready', ?, ?)
ON CONFLICT (message_id) DO NOTHING
"""

# A cheap read before taking the write lock, so idle consumers never contend for it.
PEEK = """
SELECT 1 FROM queue_messages
WHERE queue_name = ? AND state = 'ready' AND eta <= ? LIMIT 1
"""

LEASE = """
UPDATE queue_messages
SET state = 'leased', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1
WHERE id IN (
    SELECT id FROM queue_messages
    WHERE queue_name = ? AND state = 'ready' AND eta <= ?
    ORDER BY eta, id LIMIT ?
)
RETURNING id, attempts, body, eta
"""

ACK = """
DELETE FROM queue_messages
WHERE id = ? AND attempts = ? AND lease_owner = ? AND state = 'leased'
"""

BURY = """
UPDATE queue_messages
SET state = 'dead', dead_at = ?, last_error = ?, body = coalesce(?, body),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND attempts = ? AND lease_owner = ? AND state = 'leased'
"""

RELEASE = """
UPDATE queue_messages SET state = 'ready', lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND attempts = ? AND lease_owner = ? AND state = 'leased'
"""

RELEASE_OWNER = """
UPDATE queue_messages SET state = 'ready', lease_owner = NULL, lease_expires_at = NULL
WHERE state = 'leased' AND lease_owner = ?
"""

RENEW = """
UPDATE queue_messages SET lease_expires_at = ?
WHERE state = 'leased' AND lease_owner = ?
"""

RECLAIM = """
UPDATE queue_messages SET state = 'ready', lease_owner = NULL, lease_expires_at = NULL
WHERE state = 'leased' AND lease_expires_at <= ?
RETURNING id
"""

FLUSH = "DELETE FROM queue_messages WHERE queue_name = ?"

PENDING = """
SELECT count(*) FROM queue_messages WHERE queue_name = ? AND state IN ('ready', 'leased')
"""

STATS = """
SELECT queue_name,
       sum(state = 'ready' AND eta <= :now),
       sum(state = 'ready' AND eta > :now),
       sum(state = 'leased'),
       sum(state = 'dead'),
       min(CASE WHEN state = 'ready' AND eta <= :now THEN enqueued_at END)
FROM queue_messages GROUP BY queue_name
"""

DEAD = """
SELECT id, queue_name, message_id, actor_name, body, dead_at, last_error
FROM queue_messages
WHERE state = 'dead' AND (:queue IS NULL OR queue_name = :queue)
ORDER BY dead_at, id LIMIT :limit
"""

DEAD_ROWS = """
SELECT id, message_id, body FROM queue_messages
WHERE state = 'dead' AND (:queue IS NULL OR queue_name = :queue)
ORDER BY dead_at, id
"""

REQUEUE_ROW = """
UPDATE queue_messages
SET state = 'ready', eta = ?, body = ?, dead_at = NULL, last_error = NULL
WHERE id = ? AND state = 'dead'
"""

COUNT_PURGE = """
SELECT count(*) FROM queue_messages
WHERE (:queue IS NULL OR queue_name = :queue)
  AND (state = 'dead' OR (:waiting AND state = 'ready'))
"""

PURGE = """
DELETE FROM queue_messages
WHERE (:queue IS NULL OR queue_name = :queue)
  AND (state = 'dead' OR (:waiting AND state = 'ready'))
"""
