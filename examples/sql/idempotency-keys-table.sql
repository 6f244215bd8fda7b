-- What migrateKeyTable() creates for the defaults (schema public, table eo_idempotency_keys):
-- the table, its pruning index, and the two functions the requests call (plans cached per
-- session). test/integration/examples/postgres-examples.test.ts compares it with
-- migrateKeyTable()'s result.
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
  expires_at      timestamptz,            -- now() + the claim's retention; infinity: none; NULL: unknown
  PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX eo_idempotency_keys_created_at_idx ON eo_idempotency_keys (created_at);
-- Pruning deletes a row only once its own expiry has passed (rows that never expire stay out).
CREATE INDEX eo_idempotency_keys_expires_at_idx ON eo_idempotency_keys (expires_at) WHERE expires_at < 'infinity';

-- Claims the key (BEGIN first) with its lifetime in ms (NULL: never expires): the
-- transaction id, or the stored row, or all NULL.
CREATE OR REPLACE FUNCTION "public"."eo_idempotency_keys_claim_v1"(p_scope text, p_key text, p_method text, p_route text, p_fingerprint bytea, p_lock_timeout text, p_keep_ms double precision)
RETURNS TABLE (xid text, method text, route text, fingerprint bytea, status smallint, headers jsonb, body bytea, body_omitted text)
LANGUAGE plpgsql VOLATILE AS $eo$
#variable_conflict use_column
DECLARE
  saved text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout, true);
  INSERT INTO "public"."eo_idempotency_keys" (scope, idempotency_key, method, route, fingerprint, expires_at)
    VALUES (p_scope, p_key, p_method, p_route, p_fingerprint,
            coalesce(now() + p_keep_ms * interval '1 millisecond', 'infinity'))
    ON CONFLICT DO NOTHING;
  IF FOUND THEN
    PERFORM set_config('lock_timeout', saved, true);
    RETURN QUERY SELECT pg_current_xact_id_if_assigned()::text, NULL::text, NULL::text, NULL::bytea, NULL::smallint, NULL::jsonb, NULL::bytea, NULL::text;
    RETURN;
  END IF;
  PERFORM set_config('lock_timeout', saved, true);
  RETURN QUERY SELECT NULL::text, k.method, k.route, k.fingerprint, k.status, k.headers, k.body, k.body_omitted
    FROM "public"."eo_idempotency_keys" AS k WHERE k.scope = p_scope AND k.idempotency_key = p_key;
  IF NOT FOUND THEN
    RETURN QUERY SELECT NULL::text, NULL::text, NULL::text, NULL::bytea, NULL::smallint, NULL::jsonb, NULL::bytea, NULL::text;
  END IF;
END
$eo$;

-- Completes the claimed row with the response, in the COMMIT's round trip.
CREATE OR REPLACE FUNCTION "public"."eo_idempotency_keys_store_v1"(p_scope text, p_key text, p_status smallint, p_headers jsonb, p_body bytea, p_body_omitted text)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $eo$
BEGIN
  UPDATE "public"."eo_idempotency_keys" SET status = p_status, headers = p_headers, body = p_body, body_omitted = p_body_omitted
    WHERE scope = p_scope AND idempotency_key = p_key;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'effectively-once: the row of key % (scope %) is gone', p_key, p_scope
      USING ERRCODE = 'no_data_found';
  END IF;
END
$eo$;
