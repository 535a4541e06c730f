-- A user's tasks (DESIGN.md §7: tasks_add, tasks_list, tasks_complete, /v1/tasks).
-- A task belongs to its owner, not to the conversation it came from: `source_key` (the
-- key's name in the owner's namespace) and `source_turn_id` only say where it was made,
-- so erasing that key leaves the task. `due` is a calendar date (YYYY-MM-DD: no time, no
-- zone); the other times are microseconds since the epoch, as everywhere in this schema.
-- The CHECKs repeat the service's rules so that no writer can store a task it would refuse.

CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    title TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
    status TEXT NOT NULL CHECK (status IN ('open', 'done')),
    due TEXT CHECK (due IS NULL OR due GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
    source_key TEXT,
    source_turn_id TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    completed_at INTEGER,
    CHECK ((status = 'done') = (completed_at IS NOT NULL))
);

-- Listing pages walk one owner's tasks of one status in id (creation) order.
CREATE INDEX tasks_by_status ON tasks (owner, status, id);
