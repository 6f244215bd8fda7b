-- What migrateKeyTable() creates for the defaults (schema public, table eo_idempotency_keys).
-- test/integration/examples/postgres-examples.test.ts compares it with migrateKeyTable()'s result.
CREATE TABLE eo_idempotency_keys (
  scope           text        NOT NULL,
  idempotency_key text        NOT NULL,
  method          text        NOT NULL,
  route           text        NOT NULL,
  fingerprint     bytea       NOT NULL,   -- sha256 (method, route, query, body)
  status          smallint,               -- NULL only inside the claiming transaction
  headers         jsonb,                  -- the allowlisted response headers
  body            bytea,                  -- NULL when not kept
  body_omitted    text CHECK (body_omitted IN ('too-large', 'stream')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX eo_idempotency_keys_created_at_idx ON eo_idempotency_keys (created_at);
