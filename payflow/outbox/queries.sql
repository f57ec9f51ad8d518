-- name: insert_outbox
-- $1 topic (routing key), $2 payload (jsonb), $3 trace id
-- The NOTIFY is delivered only when the surrounding transaction commits.
WITH row AS (
    INSERT INTO outbox (topic, payload, trace_id) VALUES ($1, $2, $3) RETURNING id
), wake AS (
    SELECT pg_notify('payflow_outbox', '')
)
SELECT row.id FROM row, wake;
