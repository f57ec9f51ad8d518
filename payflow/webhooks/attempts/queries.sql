-- name: webhook_attempts_of_payment
-- $1 payment id, $2 most rows returned; oldest first
SELECT attempt, http_status, error, attempted_at
FROM webhook_attempt_log
WHERE payment_id = $1
ORDER BY id
LIMIT $2;

-- name: cleanup_webhook_attempt_log
-- $1 minimum age in days (clamped up to 1 by the function), $2 batch size (clamped to
-- [1, 10000]). The only way the service removes attempt rows: the SECURITY DEFINER
-- function of migration 0019 deletes rows attempted before the cutoff, oldest first.
SELECT cleanup_webhook_attempt_log($1, $2);
