-- sessiongate schema v1 (SQLite).
-- Times are integer microseconds since the Unix epoch, UTC.
--
-- `latest` is structural: each key row holds one NOT NULL, UNIQUE pointer to its latest
-- segment, so a key can never have two latest segments or none. Every segment that is not
-- pointed at is archived, and the triggers below make archived segments, their messages
-- and the rotation log immutable to any SQL, not only to the application.

CREATE TABLE session_keys (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    latest_session_id TEXT NOT NULL UNIQUE
        REFERENCES segments (session_id) DEFERRABLE INITIALLY DEFERRED,
    created_at INTEGER NOT NULL,
    overrides TEXT NOT NULL DEFAULT '{}',
    last_semantic_rotation_at INTEGER
);
CREATE INDEX session_keys_by_owner ON session_keys (owner);

CREATE TABLE segments (
    session_id TEXT PRIMARY KEY,
    key TEXT NOT NULL REFERENCES session_keys (key) DEFERRABLE INITIALLY DEFERRED,
    created_at INTEGER NOT NULL,
    archived_at INTEGER,
    parent_ids TEXT NOT NULL DEFAULT '[]',
    continues TEXT NOT NULL DEFAULT '[]',
    cleared_after_seq INTEGER NOT NULL DEFAULT 0,
    context_started_at INTEGER NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    last_activity_at INTEGER NOT NULL,
    created_reason TEXT
);
CREATE INDEX segments_by_key ON segments (key, created_at);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    segment_id TEXT NOT NULL REFERENCES segments (session_id),
    seq INTEGER NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('complete', 'interrupted')),
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    UNIQUE (segment_id, seq)
);

CREATE TABLE rotations (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL REFERENCES session_keys (key) DEFERRABLE INITIALLY DEFERRED,
    from_session_id TEXT NOT NULL,
    to_session_id TEXT NOT NULL,
    reason TEXT NOT NULL
        CHECK (reason IN ('manual', 'idle', 'day_boundary', 'semantic', 'revert')),
    at INTEGER NOT NULL,
    confidence REAL,
    deciding_model TEXT,
    in_place INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX rotations_by_key ON rotations (key, id);

-- A key listed here is being erased (DELETE /v1/sessions/{key}): only then may its rows go.
CREATE TABLE erasures (key TEXT PRIMARY KEY);

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (NEW.id, NEW.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
    VALUES ('delete', OLD.id, OLD.content);
END;

-- Messages: append-only, and only to the latest segment of their key.
CREATE TRIGGER messages_insert_latest_only BEFORE INSERT ON messages
WHEN NOT EXISTS (SELECT 1 FROM session_keys WHERE latest_session_id = NEW.segment_id)
BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: messages may only be appended to a latest segment');
END;
CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: messages are append-only');
END;
CREATE TRIGGER messages_delete_only_on_erasure BEFORE DELETE ON messages
WHEN NOT EXISTS (
    SELECT 1 FROM erasures e JOIN segments s ON s.key = e.key
    WHERE s.session_id = OLD.segment_id
)
BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: messages are append-only');
END;

-- Segments: an archived (not pointed-at) segment never changes; identity never changes.
CREATE TRIGGER segments_archived_immutable BEFORE UPDATE ON segments
WHEN NOT EXISTS (SELECT 1 FROM session_keys WHERE latest_session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: archived segment cannot change');
END;
CREATE TRIGGER segments_identity_fixed BEFORE UPDATE ON segments
WHEN NEW.session_id IS NOT OLD.session_id OR NEW.key IS NOT OLD.key
    OR NEW.created_at IS NOT OLD.created_at OR NEW.parent_ids IS NOT OLD.parent_ids
    OR NEW.continues IS NOT OLD.continues
    OR (OLD.archived_at IS NOT NULL AND NEW.archived_at IS NOT OLD.archived_at)
    OR NEW.message_count < OLD.message_count
BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: segment identity cannot change');
END;
CREATE TRIGGER segments_insert_unarchived BEFORE INSERT ON segments
WHEN NEW.archived_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: a segment is created latest, then archived');
END;
CREATE TRIGGER segments_delete_only_on_erasure BEFORE DELETE ON segments
WHEN NOT EXISTS (SELECT 1 FROM erasures WHERE key = OLD.key)
BEGIN
    SELECT RAISE(ABORT, 'segment_immutable: segments are never deleted');
END;

-- The latest pointer: moves only forward, to an unarchived segment of the same key, and
-- only after the segment it leaves has been stamped archived.
CREATE TRIGGER session_keys_pointer_insert BEFORE INSERT ON session_keys
WHEN NOT EXISTS (
    SELECT 1 FROM segments
    WHERE session_id = NEW.latest_session_id AND key = NEW.key AND archived_at IS NULL
)
BEGIN
    SELECT RAISE(ABORT, 'latest_pointer: a key must point at an unarchived segment of its own');
END;
CREATE TRIGGER session_keys_pointer_move BEFORE UPDATE OF latest_session_id ON session_keys
WHEN NEW.latest_session_id IS NOT OLD.latest_session_id AND (
    NOT EXISTS (
        SELECT 1 FROM segments
        WHERE session_id = NEW.latest_session_id AND key = NEW.key AND archived_at IS NULL
    )
    OR NOT EXISTS (
        SELECT 1 FROM segments
        WHERE session_id = OLD.latest_session_id AND archived_at IS NOT NULL
    )
)
BEGIN
    SELECT RAISE(ABORT, 'latest_pointer: may only move from an archived to an unarchived segment');
END;
CREATE TRIGGER session_keys_fixed BEFORE UPDATE OF key, owner, created_at ON session_keys
WHEN NEW.key IS NOT OLD.key OR NEW.owner IS NOT OLD.owner OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'latest_pointer: a key row keeps its identity');
END;
CREATE TRIGGER session_keys_delete_only_on_erasure BEFORE DELETE ON session_keys
WHEN NOT EXISTS (SELECT 1 FROM erasures WHERE key = OLD.key)
BEGIN
    SELECT RAISE(ABORT, 'latest_pointer: keys are removed only by erasure');
END;

-- Rotation log: append-only.
CREATE TRIGGER rotations_no_update BEFORE UPDATE ON rotations BEGIN
    SELECT RAISE(ABORT, 'rotation_log: append-only');
END;
CREATE TRIGGER rotations_delete_only_on_erasure BEFORE DELETE ON rotations
WHEN NOT EXISTS (SELECT 1 FROM erasures WHERE key = OLD.key)
BEGIN
    SELECT RAISE(ABORT, 'rotation_log: append-only');
END;
