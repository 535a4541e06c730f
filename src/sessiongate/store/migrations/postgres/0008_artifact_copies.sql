-- Copies of artifacts in a WebDAV folder (DESIGN.md §9, docs/artifacts.md): the persisted
-- queue, so a restart retries what was not copied yet. A copy is `pending` until it is
-- `copied` or, after max_attempts (or an answer no retry can change, such as refused
-- credentials), `failed`. Erasing the artifact turns its row into `deleting` (in the
-- transaction that deletes the artifact's row), the remote file's deletion, retried the
-- same way; the row goes when the remote file is gone. `remote_path` is fixed when the
-- artifact is kept, so a later change of the layout still finds old copies.
-- Several gateway processes share the queue: a sender claims a due row with
-- FOR UPDATE SKIP LOCKED and moves `next_attempt_at` past its attempt (a lease). The id
-- and owner columns collate as artifacts' do, so the two tables join.

CREATE TABLE artifact_copies (
    artifact_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    remote_path TEXT NOT NULL CHECK (char_length(remote_path) BETWEEN 1 AND 2000),
    state TEXT COLLATE "C" NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'copied', 'failed', 'deleting')),
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TIMESTAMPTZ NOT NULL,
    last_error TEXT,
    updated_at TIMESTAMPTZ NOT NULL
);

-- The sender's question, "what is due?": a range scan of the pending and deleting rows.
CREATE INDEX artifact_copies_due ON artifact_copies (state, next_attempt_at);
