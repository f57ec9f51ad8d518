-- name: idempotency_lookup
-- $1 advisory lock key, $2 merchant id, $3 scope, $4 Idempotency-Key
-- Tries the per-key transaction lock and reads any stored record in one round trip.
SELECT pg_try_advisory_xact_lock($1) AS locked,
       i.request_hash, i.state, i.response_status, i.response_body
FROM (SELECT 1) AS one
LEFT JOIN api_idempotency i ON i.merchant_id = $2 AND i.scope = $3 AND i.key = $4;

-- name: idempotency_store
-- $1 merchant id, $2 scope, $3 key, $4 request hash, $5 response status, $6 response body
INSERT INTO api_idempotency
    (merchant_id, scope, key, request_hash, state, response_status, response_body)
VALUES ($1, $2, $3, $4, 'completed', $5, $6);

-- ---- processing: gateway outcome, crediting and webhook jobs (payflow.payments.processor)
