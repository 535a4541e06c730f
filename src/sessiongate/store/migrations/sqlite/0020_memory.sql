-- Memory items (DESIGN.md §13): what the assistant knows about a user, per user, with a
-- scope, where it came from and who made it. An item's text never changes: an update
-- keeps a new item and marks the old one (invalid_at, superseded_by). Searched by
-- keywords (FTS5, bm25) and, when [notes] embeddings is set, by vectors (cosine, in
-- Python). Times are microseconds since the epoch. Same tables as PostgreSQL's
-- 0018_memory.sql.

-- `id`: the row number the keyword index and the vectors refer to (AUTOINCREMENT: never
-- reused). `memory_id`: the public id, `mem_` + 32 hex digits, sorting in creation order.
-- `source_message_ids`: a JSON array of message ids.
CREATE TABLE memory_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    text TEXT NOT NULL,
    scope TEXT NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0,
    source_key TEXT,
    source_session_id TEXT,
    source_message_ids TEXT,
    created_by TEXT NOT NULL
        CHECK (created_by IN ('user', 'agent', 'extraction', 'import')),
    created_at INTEGER NOT NULL,
    invalid_at INTEGER,
    superseded_by TEXT,
    edited_at INTEGER
);
-- Listing (newest first) and counting a user's valid items.
CREATE INDEX memory_items_by_owner ON memory_items (owner, memory_id);

CREATE VIRTUAL TABLE memory_items_fts USING fts5 (
    text, content = 'memory_items', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_items_fts (rowid, text) VALUES (NEW.id, NEW.text);
END;
CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
    INSERT INTO memory_items_fts (memory_items_fts, rowid, text) VALUES ('delete', OLD.id, OLD.text);
END;
-- The index copied the text at insert; an update never overwrites (a new item is kept).
CREATE TRIGGER memory_items_no_text_update BEFORE UPDATE OF text, owner ON memory_items
BEGIN
    SELECT RAISE(ABORT, 'memory_items_immutable: an item''s text never changes');
END;

-- One vector per item made by `embedder` (little-endian float32), gone with its item.
CREATE TABLE memory_vectors (
    item_id INTEGER PRIMARY KEY REFERENCES memory_items (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    embedder TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX memory_vectors_by_owner ON memory_vectors (owner, embedder);

-- What a user forgot or edited away, by fingerprint only (a hash of the normalised text,
-- never the text) and its source, so extraction does not add it again from there.
CREATE TABLE memory_tombstones (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    source_key TEXT,
    source_message_ids TEXT,
    reason TEXT NOT NULL CHECK (reason IN ('forgotten', 'edited')),
    created_at INTEGER NOT NULL
);
CREATE INDEX memory_tombstones_by_hash ON memory_tombstones (owner, text_hash);
