-- Notes: a user's own texts (seed 002's notes folder), searched in chunks by keywords
-- (FTS5, bm25) and, when [notes] embeddings is set, by their vectors (cosine, in Python).
-- A note is never edited: an import of a changed file removes the old note and adds a
-- new one, so chunks, their index rows and their vectors are only inserted and deleted.

CREATE TABLE notes (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    title TEXT,
    source TEXT,
    content TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
-- Listing newest first (ids are UUIDv7: they sort in creation order).
CREATE INDEX notes_by_owner ON notes (owner, id);
-- An import finds the note it replaces by its source.
CREATE INDEX notes_by_source ON notes (owner, source) WHERE source IS NOT NULL;

-- `owner` and `title` repeat the note's: a search filters and ranks chunks without a join.
-- AUTOINCREMENT: a deleted chunk's id is never reused, so an id a cache still holds can
-- never name another chunk. `embedding`: little-endian float32, made by `embedder`.
CREATE TABLE note_chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    note_id TEXT NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    seq INTEGER NOT NULL,
    title TEXT,
    content TEXT NOT NULL,
    embedder TEXT,
    embedding BLOB,
    UNIQUE (note_id, seq),
    CHECK ((embedder IS NULL) = (embedding IS NULL))
);
CREATE INDEX note_chunks_by_owner ON note_chunks (owner, embedder);

-- Porter stemming over unicode61: "running" finds "run" and "runs". `rank` is bm25 with a
-- word in the title counting double, used by `ORDER BY rank` (FTS5 sorts it itself).
CREATE VIRTUAL TABLE note_chunks_fts USING fts5 (
    title, content, content = 'note_chunks', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO note_chunks_fts (note_chunks_fts, rank) VALUES ('rank', 'bm25(2.0, 1.0)');

CREATE TRIGGER note_chunks_fts_insert AFTER INSERT ON note_chunks BEGIN
    INSERT INTO note_chunks_fts (rowid, title, content)
    VALUES (NEW.id, NEW.title, NEW.content);
END;
CREATE TRIGGER note_chunks_fts_delete AFTER DELETE ON note_chunks BEGIN
    INSERT INTO note_chunks_fts (note_chunks_fts, rowid, title, content)
    VALUES ('delete', OLD.id, OLD.title, OLD.content);
END;
-- The index copies a chunk's text when it is inserted; an edit would leave it stale.
CREATE TRIGGER note_chunks_no_update BEFORE UPDATE OF title, content, owner ON note_chunks
BEGIN
    SELECT RAISE(ABORT, 'note_chunks_immutable: a chunk''s text never changes');
END;

-- Per owner, kept by the triggers below in the transaction of every chunk written or
-- removed: `version` changes with any change (a process caching the owner's vectors
-- compares it before trusting the cache) and `chunks` counts the owner's chunks.
CREATE TABLE notes_versions (
    owner TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    chunks INTEGER NOT NULL CHECK (chunks >= 0)
);
-- Every owner's chunks together, and a version that changes with any of them. A search
-- compares the count with the owner's (equal: no other owner's chunk can match, so the
-- owner filter is left out) and with how many chunks hold a word; those word counts are
-- cached while the version stands (see sqlite_notes.py).
CREATE TABLE notes_totals (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL,
    chunks INTEGER NOT NULL CHECK (chunks >= 0)
);
INSERT INTO notes_totals (id, version, chunks) VALUES (1, 0, 0);

CREATE TRIGGER note_chunks_count_insert AFTER INSERT ON note_chunks BEGIN
    INSERT INTO notes_versions (owner, version, chunks) VALUES (NEW.owner, 1, 1)
    ON CONFLICT (owner) DO UPDATE SET version = version + 1, chunks = chunks + 1;
    UPDATE notes_totals SET version = version + 1, chunks = chunks + 1 WHERE id = 1;
END;
CREATE TRIGGER note_chunks_count_delete AFTER DELETE ON note_chunks BEGIN
    UPDATE notes_versions SET version = version + 1, chunks = chunks - 1
    WHERE owner = OLD.owner;
    UPDATE notes_totals SET version = version + 1, chunks = chunks - 1 WHERE id = 1;
END;
