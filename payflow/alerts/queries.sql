-- name: fire_alert
-- $1 key, $2 severity, $3 message, $4 details (jsonb object).
-- Opens the key's incident or counts one more firing of the open one.
INSERT INTO alerts (key, severity, message, details)
VALUES ($1, $2, $3, $4)
ON CONFLICT (key) WHERE resolved_at IS NULL DO UPDATE
   SET severity = EXCLUDED.severity,
       message = EXCLUDED.message,
       details = EXCLUDED.details,
       last_seen = greatest(alerts.last_seen, now()),
       count = alerts.count + 1
RETURNING key, severity, message, details, first_seen, last_seen, count,
          resolved_at, acknowledged_at, acknowledged_by;

-- name: resolve_alert
-- $1 key. Closes the open incident of the key, if any (none: no row).
UPDATE alerts
   SET resolved_at = greatest(now(), first_seen)
 WHERE key = $1 AND resolved_at IS NULL
RETURNING key, severity, message, details, first_seen, last_seen, count,
          resolved_at, acknowledged_at, acknowledged_by;

-- name: acknowledge_alert
-- $1 key, $2 operator. Acknowledges the open incident of the key (none: no row);
-- a second acknowledgement keeps the first one's time and operator.
UPDATE alerts
   SET acknowledged_at = coalesce(acknowledged_at, now()),
       acknowledged_by = coalesce(acknowledged_by, $2)
 WHERE key = $1 AND resolved_at IS NULL
RETURNING key, severity, message, details, first_seen, last_seen, count,
          resolved_at, acknowledged_at, acknowledged_by;

-- name: list_alerts
-- $1 include resolved incidents (bool), $2 limit. Open first, most severe first, newest first.
SELECT key, severity, message, details, first_seen, last_seen, count,
       resolved_at, acknowledged_at, acknowledged_by
  FROM alerts
 WHERE $1 OR resolved_at IS NULL
 ORDER BY resolved_at IS NOT NULL,
          CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
          last_seen DESC
 LIMIT $2;
