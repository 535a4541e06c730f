-- The Conversations API (DESIGN.md §14).
--
-- 1. The rotation reason `edit`: an item deleted from a conversation; the key rotates to a
--    new segment holding the remaining items (history is never rewritten). SQLite cannot
--    change a CHECK in place, so the rotation log is copied into a table with the wider
--    CHECK; its guards are put back exactly as they were (as 0013 did for `fork`).
-- 2. A conversation object (`conv_…`): a key in its owner's namespace and its metadata
--    (JSON text). Erased with its key and with its owner. Times are microseconds since
--    the epoch.

DROP TRIGGER rotations_no_update;
DROP TRIGGER rotations_delete_only_on_erasure;

CREATE TABLE rotations_widened (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL REFERENCES session_keys (key) DEFERRABLE INITIALLY DEFERRED,
    from_session_id TEXT NOT NULL,
    to_session_id TEXT NOT NULL,
    reason TEXT NOT NULL
        CHECK (reason IN ('manual', 'idle', 'day_boundary', 'semantic', 'revert', 'fork', 'edit')),
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

CREATE TABLE conversation_objects (
    conversation_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL
);
CREATE INDEX conversation_objects_by_key ON conversation_objects (owner, key);
