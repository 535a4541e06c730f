-- Mode unlocks (DESIGN.md §8): a user unlocks a mode enabled for them for a while. Every
-- unlock is its own row and a lock only stamps `locked_at`/`locked_by` on the rows it
-- ends, so who unlocked and locked what, and when, is never overwritten. Times are
-- microseconds since the epoch, as everywhere in this schema. The CHECKs repeat the
-- service's rules so that no writer can store an unlock it would refuse.

CREATE TABLE mode_unlocks (
    unlock_id TEXT PRIMARY KEY,
    user_name TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    mode TEXT NOT NULL CHECK (length(mode) BETWEEN 1 AND 32),
    unlocked_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL CHECK (expires_at > unlocked_at),
    unlocked_by TEXT NOT NULL,
    locked_at INTEGER CHECK (locked_at IS NULL OR locked_at >= unlocked_at),
    locked_by TEXT,
    CHECK ((locked_at IS NULL) = (locked_by IS NULL))
);

-- A turn that names a mode asks for that user's unlocks of it still running: one range
-- scan of this index.
CREATE INDEX mode_unlocks_by_mode ON mode_unlocks (user_name, mode, expires_at);
-- GET /v1/me lists a user's newest unlocks first.
CREATE INDEX mode_unlocks_by_time ON mode_unlocks (user_name, unlocked_at);
