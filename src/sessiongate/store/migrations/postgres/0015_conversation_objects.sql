-- The Conversations API (DESIGN.md §14); SQLite's 0017 in PostgreSQL's terms.
--
-- 1. The rotation reason `edit`: an item deleted from a conversation; the key rotates to a
--    new segment holding the remaining items (history is never rewritten).
-- 2. A conversation object (`conv_…`): a key in its owner's namespace and its metadata
--    (JSON text). Erased with its key and with its owner.

ALTER TABLE rotations DROP CONSTRAINT rotations_reason_check;
ALTER TABLE rotations ADD CONSTRAINT rotations_reason_check
    CHECK (reason IN ('manual', 'idle', 'day_boundary', 'semantic', 'revert', 'fork', 'edit'));

CREATE TABLE conversation_objects (
    conversation_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX conversation_objects_by_key ON conversation_objects (owner, key);
