-- The Responses API (DESIGN.md §14): a response is a turn on a key; this row is what
-- finds it again by its id (`resp_…`): its key, the conversation node its answer ended
-- at (where a `previous_response_id` continues, or forks), the response object and its
-- input items as JSON. Only responses with `store: true` have a row. Deleting a
-- response deletes the row; the turn's messages stay in their segment. Times are
-- microseconds since the epoch.

CREATE TABLE responses (
    response_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    tip_hash TEXT NOT NULL,
    tip_position INTEGER NOT NULL,
    body TEXT NOT NULL,
    input_items TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE INDEX responses_by_key ON responses (owner, key);
