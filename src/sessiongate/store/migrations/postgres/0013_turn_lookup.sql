-- A turn found by its id (GET /v1/turns/{turn_id}/events and the WebSocket `resume` on any
-- worker, after any restart): the turn's messages carry `metadata.turn_id`, so an index on
-- that expression answers the lookup without a scan. Partial: messages without a turn id
-- take no room in it. The lookup must use the same expression, `(metadata ->> 'turn_id')`.

CREATE INDEX messages_by_turn ON messages ((metadata ->> 'turn_id'))
WHERE (metadata ->> 'turn_id') IS NOT NULL;
