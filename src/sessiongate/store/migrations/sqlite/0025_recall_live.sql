-- Explicit recall with scope "all" reads the newest (live) segments of the caller's other
-- keys too (DESIGN.md §13, "Recall across keys"): what another key said is out of this
-- key's context whether or not that key rotated since. recall_fts still takes a segment's
-- messages when it is archived; a live segment's messages enter it lazily, when a recall
-- over its owner's keys runs (store/sqlite/recall_index.py `catch_up`), never on append, so
-- the turn's write path stays as it was. recall_live says how far each live segment is in
-- recall_fts already; the archive trigger adds only the rest and forgets the row.

CREATE TABLE recall_live (
    session_id TEXT PRIMARY KEY REFERENCES segments (session_id) ON DELETE CASCADE,
    through_seq INTEGER NOT NULL
);

DROP TRIGGER recall_fts_on_archive;

CREATE TRIGGER recall_fts_on_archive AFTER UPDATE OF archived_at ON segments
WHEN OLD.archived_at IS NULL AND NEW.archived_at IS NOT NULL
BEGIN
    INSERT INTO recall_fts (rowid, owner, content)
    SELECT m.id, 'o' || hex(k.owner), m.content
    FROM messages m JOIN session_keys k ON k.key = NEW.key
    WHERE m.segment_id = NEW.session_id
      AND m.seq > coalesce(
          (SELECT through_seq FROM recall_live WHERE session_id = NEW.session_id), 0
      );
    DELETE FROM recall_live WHERE session_id = NEW.session_id;
END;

-- A message leaves the index on erasure if it is in it: archived, or indexed while live.
DROP TRIGGER recall_fts_delete;

CREATE TRIGGER recall_fts_delete AFTER DELETE ON messages
WHEN EXISTS (
    SELECT 1 FROM segments WHERE session_id = OLD.segment_id AND archived_at IS NOT NULL
) OR EXISTS (
    SELECT 1 FROM recall_live WHERE session_id = OLD.segment_id AND through_seq >= OLD.seq
)
BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, owner, content)
    SELECT 'delete', OLD.id, 'o' || hex(k.owner), OLD.content
    FROM segments s JOIN session_keys k ON k.key = s.key
    WHERE s.session_id = OLD.segment_id;
END;
