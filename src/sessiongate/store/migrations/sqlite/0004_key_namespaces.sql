-- Session keys live in their owner's namespace: two users may both have `notes`, and one
-- can no longer take another's default route key (`agent:main:main`, `chat:carol`) first.
-- The stored key becomes `owner/key` (neither a user name nor a key may hold `/`), so
-- every table, trigger and index that compares keys keeps working unchanged.
--
-- The guards that forbid rewriting a key are lifted for this one transaction and put
-- back exactly as they were.

DROP TRIGGER session_keys_fixed;
DROP TRIGGER segments_archived_immutable;
DROP TRIGGER segments_identity_fixed;
DROP TRIGGER rotations_no_update;

UPDATE segments SET key = (
    SELECT k.owner || '/' || k.key FROM session_keys k WHERE k.key = segments.key
);
UPDATE rotations SET key = (
    SELECT k.owner || '/' || k.key FROM session_keys k WHERE k.key = rotations.key
);
UPDATE session_keys SET key = owner || '/' || key;

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
CREATE TRIGGER session_keys_fixed BEFORE UPDATE OF key, owner, created_at ON session_keys
WHEN NEW.key IS NOT OLD.key OR NEW.owner IS NOT OLD.owner OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'latest_pointer: a key row keeps its identity');
END;
CREATE TRIGGER rotations_no_update BEFORE UPDATE ON rotations BEGIN
    SELECT RAISE(ABORT, 'rotation_log: append-only');
END;
