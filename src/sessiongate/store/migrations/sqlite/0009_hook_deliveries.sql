-- Webhook deliveries (DESIGN.md §9, docs/hooks.md): the persisted queue, so a restart
-- resumes what was not delivered yet. A delivery is `pending` until it is `delivered` or,
-- after its hook's max_attempts, `failed`; finished rows are kept for inspection up to the
-- hook's queue_size. `body` is the JSON exactly as it is sent and signed. `owner` and
-- `session_key` name the key an event is about, so erasing the key erases its deliveries.
-- Times are microseconds since the epoch, as everywhere in this schema.

CREATE TABLE hook_deliveries (
    id TEXT PRIMARY KEY,
    hook TEXT NOT NULL CHECK (length(hook) BETWEEN 1 AND 64),
    event TEXT NOT NULL CHECK (length(event) BETWEEN 1 AND 64),
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    delivered_at INTEGER,
    failed_at INTEGER,
    created_at INTEGER NOT NULL,
    owner TEXT,
    session_key TEXT,
    CHECK ((status = 'delivered') = (delivered_at IS NOT NULL)),
    CHECK ((status = 'failed') = (failed_at IS NOT NULL))
);

-- The sender's question, "what is due?": a range scan of the pending rows by time.
CREATE INDEX hook_deliveries_due ON hook_deliveries (status, next_attempt_at);
-- The queue bound and the pruning of finished rows walk one hook's rows by age.
CREATE INDEX hook_deliveries_by_hook ON hook_deliveries (hook, status, id);
-- Erasing a key finds its deliveries.
CREATE INDEX hook_deliveries_by_key ON hook_deliveries (owner, session_key)
    WHERE owner IS NOT NULL;
