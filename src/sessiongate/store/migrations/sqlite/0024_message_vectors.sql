-- Embedding vectors of archived messages, for explicit recall fused with embeddings
-- (DESIGN.md §13, "Recall across keys"). A vector names its message by segment and seq
-- (as pins do), holds little-endian float32 values, and records the embedder that made
-- it, so a gateway that changes its embeddings model never compares two models' vectors
-- (a message is embedded again under the new one). Derived data: written in the
-- background after a rotation archives a segment, or at the first recall that finds a
-- message without one; erased with its segment.

CREATE TABLE message_vectors (
    session_id TEXT NOT NULL REFERENCES segments (session_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    embedder TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- Explicit recall's keyword index: the archived messages once more, with their owner as
-- one token ('o' || hex(owner)), so a recall over every key of one user (scope "all")
-- asks FTS5 for that owner's matches only (`owner : "o…" AND (…)`) instead of scoring
-- every user's matches and filtering after: at 100,000 messages, milliseconds instead of
-- hundreds of them. Contentless (the text stays in `messages`); like messages_fts it is
-- filled when a segment is archived and emptied as its messages are erased.
CREATE VIRTUAL TABLE recall_fts USING fts5 (
    owner, content, content = '', tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO recall_fts (rowid, owner, content)
SELECT m.id, 'o' || hex(k.owner), m.content
FROM messages m
JOIN segments s ON s.session_id = m.segment_id
JOIN session_keys k ON k.key = s.key
WHERE s.archived_at IS NOT NULL;

CREATE TRIGGER recall_fts_on_archive AFTER UPDATE OF archived_at ON segments
WHEN OLD.archived_at IS NULL AND NEW.archived_at IS NOT NULL
BEGIN
    INSERT INTO recall_fts (rowid, owner, content)
    SELECT m.id, 'o' || hex(k.owner), m.content
    FROM messages m JOIN session_keys k ON k.key = NEW.key
    WHERE m.segment_id = NEW.session_id;
END;

-- A contentless index forgets a row given exactly what was indexed; messages go before
-- their segment and key on erasure (store/sqlite/store.py), so the owner is still known.
CREATE TRIGGER recall_fts_delete AFTER DELETE ON messages
WHEN EXISTS (
    SELECT 1 FROM segments WHERE session_id = OLD.segment_id AND archived_at IS NOT NULL
)
BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, owner, content)
    SELECT 'delete', OLD.id, 'o' || hex(k.owner), OLD.content
    FROM segments s JOIN session_keys k ON k.key = s.key
    WHERE s.session_id = OLD.segment_id;
END;
