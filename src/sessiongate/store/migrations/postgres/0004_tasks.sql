-- A user's tasks (DESIGN.md §7: tasks_add, tasks_list, tasks_complete, /v1/tasks).
-- A task belongs to its owner, not to the conversation it came from: `source_key` (the
-- key's name in the owner's namespace) and `source_turn_id` only say where it was made,
-- so erasing that key leaves the task. `due` is a calendar date: no time, no zone.
-- The CHECKs repeat the service's rules so that no writer can store a task it would refuse.

CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    title TEXT NOT NULL CHECK (char_length(title) BETWEEN 1 AND 500),
    status TEXT NOT NULL CHECK (status IN ('open', 'done')),
    due DATE,
    source_key TEXT,
    source_turn_id TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ,
    CHECK ((status = 'done') = (completed_at IS NOT NULL))
);

-- Listing pages walk one owner's tasks of one status in id (creation) order.
CREATE INDEX tasks_by_status ON tasks (owner, status, id);
