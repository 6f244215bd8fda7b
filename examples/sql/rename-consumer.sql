-- Renaming a consumer from 'orders' to 'orders-v2' (replace both, and the table if you
-- changed it): copy the old name's claims to the new one, so that a message redelivered
-- across the rename is a duplicate instead of applied again. Run it once every worker
-- under the old name has stopped, before any worker under the new name starts. The
-- claims keep their processed_at, so pruning ages them as before.
INSERT INTO processed_messages (consumer, message_key, payload_hash, processed_at)
SELECT 'orders-v2', message_key, payload_hash, processed_at
  FROM processed_messages
 WHERE consumer = 'orders'
    ON CONFLICT (consumer, message_key) DO NOTHING;
