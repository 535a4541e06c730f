-- Files tools make (generated images, later audio and attachments). The bytes live under
-- data_dir/artifacts; a row says whose a file is and which conversation made it, so
-- erasing a key or a user can find its files. `key` is the name in the owner's namespace.

CREATE TABLE artifacts (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    key TEXT,
    turn_id TEXT,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL CHECK (size > 0),
    sha256 TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    file_name TEXT NOT NULL
);

CREATE INDEX artifacts_by_key ON artifacts (owner, key);
