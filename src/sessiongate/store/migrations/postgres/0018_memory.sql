-- Memory items (DESIGN.md §13): what the assistant knows about a user, per user, with a
-- scope, where it came from and who made it. An item's text never changes: an update
-- keeps a new item and marks the old one (invalid_at, superseded_by). Searched by
-- keywords (a generated tsvector, GIN, ts_rank) and, when [notes] embeddings is set, by
-- vectors (cosine, in Python). Same tables and answers as SQLite's 0020_memory.sql.

CREATE TABLE memory_items (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id TEXT COLLATE "C" NOT NULL UNIQUE,
    owner TEXT COLLATE "C" NOT NULL,
    text TEXT NOT NULL,
    scope TEXT NOT NULL,
    pinned BOOLEAN NOT NULL DEFAULT FALSE,
    source_key TEXT,
    source_session_id TEXT,
    source_message_ids JSONB,
    created_by TEXT NOT NULL
        CHECK (created_by IN ('user', 'agent', 'extraction', 'import')),
    created_at TIMESTAMPTZ NOT NULL,
    invalid_at TIMESTAMPTZ,
    superseded_by TEXT,
    edited_at TIMESTAMPTZ,
    document TSVECTOR GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED
);
CREATE INDEX memory_items_by_owner ON memory_items (owner, memory_id);
CREATE INDEX memory_items_document ON memory_items USING GIN (document);

-- The text never changes (an update keeps a new item), as SQLite's trigger also holds.
CREATE FUNCTION memory_items_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.text IS DISTINCT FROM OLD.text OR NEW.owner IS DISTINCT FROM OLD.owner THEN
        RAISE EXCEPTION 'memory_items_immutable: an item''s text never changes';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER memory_items_no_text_update BEFORE UPDATE ON memory_items
    FOR EACH ROW EXECUTE FUNCTION memory_items_immutable();

CREATE TABLE memory_vectors (
    item_id BIGINT PRIMARY KEY REFERENCES memory_items (id) ON DELETE CASCADE,
    owner TEXT COLLATE "C" NOT NULL,
    embedder TEXT NOT NULL,
    embedding BYTEA NOT NULL
);
CREATE INDEX memory_vectors_by_owner ON memory_vectors (owner, embedder);

CREATE TABLE memory_tombstones (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    text_hash TEXT NOT NULL,
    source_key TEXT,
    source_message_ids JSONB,
    reason TEXT NOT NULL CHECK (reason IN ('forgotten', 'edited')),
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX memory_tombstones_by_hash ON memory_tombstones (owner, text_hash);
