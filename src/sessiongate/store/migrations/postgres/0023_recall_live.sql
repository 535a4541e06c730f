-- Explicit recall with scope "all" reads the newest (live) segments of the caller's other
-- keys too (DESIGN.md §13, "Recall across keys"). A live segment's messages enter
-- message_search lazily, when a recall over its owner's keys runs
-- (store/postgres/recall_index.py `catch_up`), never on append, so the turn's write path
-- stays as it was; on archiving, the segment's messages that are not in it yet follow.

CREATE OR REPLACE FUNCTION sg_index_on_archive() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_search (message_id, segment_id, document)
    SELECT id, segment_id, to_tsvector('simple', content)
    FROM messages WHERE segment_id = NEW.session_id
    ON CONFLICT (message_id) DO NOTHING;
    RETURN NULL;
END;
$$;
