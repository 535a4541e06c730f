-- Copies of artifacts in a WebDAV folder (DESIGN.md §9, docs/artifacts.md): the persisted
-- queue, so a restart retries what was not copied yet. A copy is `pending` until it is
-- `copied` or, after max_attempts (or an answer no retry can change, such as refused
-- credentials), `failed`. Erasing the artifact turns its row into `deleting` (in the
-- transaction that deletes the artifact's row), the remote file's deletion, retried the
-- same way; the row goes when the remote file is gone. `remote_path` is fixed when the
-- artifact is kept, so a later change of the layout still finds old copies.
-- `next_attempt_at` is when the row is due; a sender moves it past its attempt (a lease).
-- Times are microseconds since the epoch, as everywhere in this schema.

CREATE TABLE artifact_copies (
    artifact_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    remote_path TEXT NOT NULL CHECK (length(remote_path) BETWEEN 1 AND 2000),
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'copied', 'failed', 'deleting')),
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    updated_at INTEGER NOT NULL
);

-- The sender's question, "what is due?": a range scan of the pending and deleting rows.
CREATE INDEX artifact_copies_due ON artifact_copies (state, next_attempt_at);
