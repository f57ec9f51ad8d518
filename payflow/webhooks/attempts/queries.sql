-- name: log_webhook_attempt
-- $1 payment id, $2 attempt number (1-based), $3 HTTP status or null, $4 error text or null
INSERT INTO webhook_attempt_log (payment_id, attempt, http_status, error)
VALUES ($1, $2, $3, $4);

-- name: webhook_attempts_of_payment
-- $1 payment id, $2 most rows returned; oldest first
SELECT attempt, http_status, error, attempted_at
FROM webhook_attempt_log
WHERE payment_id = $1
ORDER BY id
LIMIT $2;
