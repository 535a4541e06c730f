-- Recall searches archived segments only, so index a segment's messages once, when it is
-- archived, instead of on every append: this takes the full-text index off the per-turn
-- write path (about three quarters of the pages a turn wrote).

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;

-- Messages of segments that are still latest leave the index; they return on archive.
INSERT INTO messages_fts (messages_fts, rowid, content)
SELECT 'delete', m.id, m.content
FROM messages m JOIN session_keys k ON k.latest_session_id = m.segment_id;

CREATE TRIGGER segments_index_on_archive AFTER UPDATE OF archived_at ON segments
WHEN OLD.archived_at IS NULL AND NEW.archived_at IS NOT NULL
BEGIN
    INSERT INTO messages_fts (rowid, content)
    SELECT id, content FROM messages WHERE segment_id = NEW.session_id;
END;

-- Only indexed rows (those of archived segments) are removed from the index on erasure.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN EXISTS (
    SELECT 1 FROM segments WHERE session_id = OLD.segment_id AND archived_at IS NOT NULL
)
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
    VALUES ('delete', OLD.id, OLD.content);
END;
