-- A turn found by its id (GET /v1/turns/{turn_id}/events and the WebSocket `resume` after
-- a restart): the turn's messages carry `metadata.turn_id`, so an index on that expression
-- answers the lookup without a scan. Partial: messages without a turn id (imported or
-- written before turns had ids) take no room in it. The lookup must use the very same
-- expression, `json_extract(metadata, '$.turn_id')`, for SQLite to pick this index.

CREATE INDEX messages_by_turn ON messages (json_extract(metadata, '$.turn_id'))
WHERE json_extract(metadata, '$.turn_id') IS NOT NULL;
