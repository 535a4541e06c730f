-- Users and their API keys. Keys are stored as SHA-256 digests of the whole key; the
-- short public `key_id` finds the row, and the digest is compared in constant time.

CREATE TABLE users (
    name TEXT PRIMARY KEY,
    is_primary INTEGER NOT NULL DEFAULT 0,
    is_admin INTEGER NOT NULL DEFAULT 0,
    modes TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL
);
-- At most one primary user.
CREATE UNIQUE INDEX users_one_primary ON users (is_primary) WHERE is_primary = 1;

CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY,
    user_name TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    digest TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX api_keys_by_user ON api_keys (user_name);
