-- OpenAI-compatible conversations (DESIGN.md §11).
--
-- 1. The rotation reason `fork`: a client re-sent its conversation with an earlier message
--    edited, and a new segment continues the shared part. SQLite cannot change a CHECK in
--    place, so the rotation log is copied into a table with the wider CHECK; its guards are
--    put back exactly as they were.
-- 2. The conversation index (store/conversations_base.py): one node per message as the
--    client sees it, named by the rolling hash of its branch, and each key's head. Derived
--    data beside the append-only history; erased with its key.

DROP TRIGGER rotations_no_update;
DROP TRIGGER rotations_delete_only_on_erasure;

CREATE TABLE rotations_widened (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL REFERENCES session_keys (key) DEFERRABLE INITIALLY DEFERRED,
    from_session_id TEXT NOT NULL,
    to_session_id TEXT NOT NULL,
    reason TEXT NOT NULL
        CHECK (reason IN ('manual', 'idle', 'day_boundary', 'semantic', 'revert', 'fork')),
    at INTEGER NOT NULL,
    confidence REAL,
    deciding_model TEXT,
    in_place INTEGER NOT NULL DEFAULT 0
);
INSERT INTO rotations_widened
    (id, key, from_session_id, to_session_id, reason, at, confidence, deciding_model, in_place)
SELECT id, key, from_session_id, to_session_id, reason, at, confidence, deciding_model, in_place
FROM rotations;
DROP TABLE rotations;
ALTER TABLE rotations_widened RENAME TO rotations;
CREATE INDEX rotations_by_key ON rotations (key, id);

CREATE TRIGGER rotations_no_update BEFORE UPDATE ON rotations BEGIN
    SELECT RAISE(ABORT, 'rotation_log: append-only');
END;
CREATE TRIGGER rotations_delete_only_on_erasure BEFORE DELETE ON rotations
WHEN NOT EXISTS (SELECT 1 FROM erasures WHERE key = OLD.key)
BEGIN
    SELECT RAISE(ABORT, 'rotation_log: append-only');
END;

CREATE TABLE conversation_nodes (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    hash TEXT NOT NULL,
    parent TEXT NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    session_id TEXT,
    message_ids TEXT NOT NULL DEFAULT '[]',
    UNIQUE (key, hash)
);
-- Finding the list a client sent: the owner's nodes by hash.
CREATE INDEX conversation_nodes_by_owner ON conversation_nodes (owner, hash);

CREATE TABLE conversation_heads (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    hash TEXT NOT NULL,
    position INTEGER NOT NULL,
    moved_at INTEGER NOT NULL
);
CREATE INDEX conversation_heads_by_owner ON conversation_heads (owner, hash);
