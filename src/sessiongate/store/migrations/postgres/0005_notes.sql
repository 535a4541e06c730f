-- Notes: a user's own texts (seed 002's notes folder), searched in chunks by keywords
-- (a generated tsvector, GIN, ts_rank) and, when [notes] embeddings is set, by their
-- vectors (cosine, in Python). A note is never edited: an import of a changed file removes
-- the old note and adds a new one. Same tables and answers as SQLite's 0007_notes.sql.

CREATE TABLE notes (
    id TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    title TEXT,
    source TEXT,
    content TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX notes_by_owner ON notes (owner, id);
CREATE INDEX notes_by_source ON notes (owner, source) WHERE source IS NOT NULL;

-- `owner` and `title` repeat the note's, so the generated document can weigh the title
-- and a search filters chunks without a join. 'english': stemmed words ("running" finds
-- "run"), like SQLite's porter tokenizer. `embedding`: little-endian float32.
CREATE TABLE note_chunks (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    note_id TEXT COLLATE "C" NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
    owner TEXT COLLATE "C" NOT NULL,
    seq INTEGER NOT NULL,
    title TEXT,
    content TEXT NOT NULL,
    embedder TEXT,
    embedding BYTEA,
    document TSVECTOR GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || to_tsvector('english'::regconfig, content)
    ) STORED,
    UNIQUE (note_id, seq),
    CHECK ((embedder IS NULL) = (embedding IS NULL))
);
CREATE INDEX note_chunks_by_owner ON note_chunks (owner, embedder);
CREATE INDEX note_chunks_document ON note_chunks USING GIN (document);

CREATE TABLE notes_versions (
    owner TEXT COLLATE "C" PRIMARY KEY,
    version BIGINT NOT NULL
);
