-- What migrate() creates for the defaults (schema public, table processed_messages).
-- test/integration/examples/sql-examples.test.ts compares it with migrate()'s result.
CREATE TABLE processed_messages (
  consumer     text        NOT NULL,        -- the consumer's name: its dedup namespace
  message_key  text        NOT NULL,        -- the dedup key
  payload_hash bytea,                       -- sha256 of the payload; NULL with payloadHash: false
  processed_at timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,                 -- now() + the consumer's retention; infinity: none
  PRIMARY KEY (consumer, message_key)
);
CREATE INDEX processed_messages_processed_at_idx ON processed_messages (processed_at);
-- Pruning deletes a row only once its own expiry has passed (rows that never expire stay out).
CREATE INDEX processed_messages_expires_at_idx ON processed_messages (expires_at) WHERE expires_at < 'infinity';
