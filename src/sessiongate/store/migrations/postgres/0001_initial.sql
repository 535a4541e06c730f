-- sessiongate schema v1 (PostgreSQL): the same tables and invariants as the SQLite schema
-- (migrations 0001-0003 there), in PostgreSQL's terms.
--
-- `latest` is structural: each key row holds one NOT NULL, UNIQUE pointer to its latest
-- segment, so a key can never have two latest segments or none. Every segment that is not
-- pointed at is archived, and the triggers below make archived segments, their messages
-- and the rotation log immutable to any SQL, not only to the application.
--
-- Identifiers use the "C" collation so that ORDER BY key sorts byte-wise, as SQLite does,
-- whatever the database's locale. `pos` and `id` are identity columns that record insertion
-- order: the chain and the rotation log are ordered by them, never by timestamps.

CREATE TABLE session_keys (
    key TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    latest_session_id TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL,
    overrides JSON NOT NULL DEFAULT '{}',
    last_semantic_rotation_at TIMESTAMPTZ
);
CREATE INDEX session_keys_by_owner ON session_keys (owner);

CREATE TABLE segments (
    pos BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    session_id TEXT COLLATE "C" PRIMARY KEY,
    key TEXT COLLATE "C" NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    archived_at TIMESTAMPTZ,
    parent_ids TEXT[] NOT NULL DEFAULT '{}',
    continues TEXT[] NOT NULL DEFAULT '{}',
    cleared_after_seq INTEGER NOT NULL DEFAULT 0,
    context_started_at TIMESTAMPTZ NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    last_activity_at TIMESTAMPTZ NOT NULL,
    created_reason TEXT
);
CREATE INDEX segments_by_key ON segments (key, pos);

-- The two rows point at each other; the checks wait for COMMIT so either can come first.
ALTER TABLE session_keys ADD CONSTRAINT session_keys_latest_fkey
    FOREIGN KEY (latest_session_id) REFERENCES segments (session_id)
    DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE segments ADD CONSTRAINT segments_key_fkey
    FOREIGN KEY (key) REFERENCES session_keys (key) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    segment_id TEXT COLLATE "C" NOT NULL REFERENCES segments (session_id),
    seq INTEGER NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('complete', 'interrupted')),
    -- JSON, not JSONB: the text comes back exactly as written (key order included).
    metadata JSON NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (segment_id, seq)
);

CREATE TABLE rotations (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key TEXT COLLATE "C" NOT NULL
        REFERENCES session_keys (key) DEFERRABLE INITIALLY DEFERRED,
    from_session_id TEXT COLLATE "C" NOT NULL,
    to_session_id TEXT COLLATE "C" NOT NULL,
    reason TEXT NOT NULL
        CHECK (reason IN ('manual', 'idle', 'day_boundary', 'semantic', 'revert')),
    at TIMESTAMPTZ NOT NULL,
    confidence DOUBLE PRECISION,
    deciding_model TEXT,
    in_place BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX rotations_by_key ON rotations (key, id);

-- A key listed here is being erased (DELETE /v1/sessions/{key}): only then may its rows go.
CREATE TABLE erasures (key TEXT COLLATE "C" PRIMARY KEY);

-- Recall searches archived segments only, so a segment's messages are indexed once, when it
-- is archived, not on every append: the GIN index stays off the per-turn write path.
-- 'simple': lower-cased words, no stemming and no stop words, like SQLite's unicode61.
CREATE TABLE message_search (
    message_id BIGINT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    segment_id TEXT COLLATE "C" NOT NULL,
    document TSVECTOR NOT NULL
);
CREATE INDEX message_search_document ON message_search USING GIN (document);
CREATE INDEX message_search_by_segment ON message_search (segment_id);

-- Users and their API keys. Keys are stored as SHA-256 digests of the whole key; the
-- short public `key_id` finds the row, and the digest is compared in constant time.
CREATE TABLE users (
    name TEXT COLLATE "C" PRIMARY KEY,
    is_primary BOOLEAN NOT NULL DEFAULT FALSE,
    is_admin BOOLEAN NOT NULL DEFAULT FALSE,
    modes TEXT[] NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL
);
-- At most one primary user.
CREATE UNIQUE INDEX users_one_primary ON users (is_primary) WHERE is_primary;

CREATE TABLE api_keys (
    key_id TEXT COLLATE "C" PRIMARY KEY,
    user_name TEXT COLLATE "C" NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    digest TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX api_keys_by_user ON api_keys (user_name);

-- Guards. Each raises with a message that starts with the rule's name (segment_immutable,
-- latest_pointer, rotation_log); the store maps those to ImmutableSegment, as SQLite's does.

CREATE FUNCTION sg_refuse(message TEXT) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', message USING ERRCODE = 'raise_exception';
END;
$$;

-- TRUNCATE skips row triggers, so it is refused outright on the guarded tables.
CREATE FUNCTION sg_no_truncate() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sg_refuse('segment_immutable: ' || TG_TABLE_NAME || ' cannot be truncated');
    RETURN NULL;
END;
$$;

CREATE FUNCTION sg_being_erased(erased_key TEXT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM erasures WHERE key = erased_key);
$$;

-- Messages: append-only, and only to the latest segment of their key.
CREATE FUNCTION sg_messages_guard() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM session_keys WHERE latest_session_id = NEW.segment_id)
        THEN
            PERFORM sg_refuse(
                'segment_immutable: messages may only be appended to a latest segment');
        END IF;
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM sg_refuse('segment_immutable: messages are append-only');
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM erasures e JOIN segments s ON s.key = e.key
        WHERE s.session_id = OLD.segment_id
    ) THEN
        PERFORM sg_refuse('segment_immutable: messages are append-only');
    END IF;
    RETURN OLD;
END;
$$;
CREATE TRIGGER messages_guard BEFORE INSERT OR UPDATE OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION sg_messages_guard();
CREATE TRIGGER messages_no_truncate BEFORE TRUNCATE ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION sg_no_truncate();

-- Segments: an archived (not pointed-at) segment never changes; identity never changes.
CREATE FUNCTION sg_segments_guard() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.archived_at IS NOT NULL THEN
            PERFORM sg_refuse('segment_immutable: a segment is created latest, then archived');
        END IF;
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        IF NOT sg_being_erased(OLD.key) THEN
            PERFORM sg_refuse('segment_immutable: segments are never deleted');
        END IF;
        RETURN OLD;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM session_keys WHERE latest_session_id = OLD.session_id) THEN
        PERFORM sg_refuse('segment_immutable: archived segment cannot change');
    END IF;
    IF NEW.session_id IS DISTINCT FROM OLD.session_id OR NEW.key IS DISTINCT FROM OLD.key
        OR NEW.pos IS DISTINCT FROM OLD.pos
        OR NEW.created_at IS DISTINCT FROM OLD.created_at
        OR NEW.parent_ids IS DISTINCT FROM OLD.parent_ids
        OR NEW.continues IS DISTINCT FROM OLD.continues
        OR (OLD.archived_at IS NOT NULL AND NEW.archived_at IS DISTINCT FROM OLD.archived_at)
        OR NEW.message_count < OLD.message_count
    THEN
        PERFORM sg_refuse('segment_immutable: segment identity cannot change');
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER segments_guard BEFORE INSERT OR UPDATE OR DELETE ON segments
    FOR EACH ROW EXECUTE FUNCTION sg_segments_guard();
CREATE TRIGGER segments_no_truncate BEFORE TRUNCATE ON segments
    FOR EACH STATEMENT EXECUTE FUNCTION sg_no_truncate();

-- On archiving, the segment's messages enter the full-text index.
CREATE FUNCTION sg_index_on_archive() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_search (message_id, segment_id, document)
    SELECT id, segment_id, to_tsvector('simple', content)
    FROM messages WHERE segment_id = NEW.session_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER segments_index_on_archive AFTER UPDATE OF archived_at ON segments
    FOR EACH ROW WHEN (OLD.archived_at IS NULL AND NEW.archived_at IS NOT NULL)
    EXECUTE FUNCTION sg_index_on_archive();

-- The latest pointer: moves only forward, to an unarchived segment of the same key, and
-- only after the segment it leaves has been stamped archived.
CREATE FUNCTION sg_session_keys_guard() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT sg_being_erased(OLD.key) THEN
            PERFORM sg_refuse('latest_pointer: keys are removed only by erasure');
        END IF;
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (
            SELECT 1 FROM segments
            WHERE session_id = NEW.latest_session_id AND key = NEW.key AND archived_at IS NULL
        ) THEN
            PERFORM sg_refuse(
                'latest_pointer: a key must point at an unarchived segment of its own');
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.key IS DISTINCT FROM OLD.key OR NEW.owner IS DISTINCT FROM OLD.owner
        OR NEW.created_at IS DISTINCT FROM OLD.created_at
    THEN
        PERFORM sg_refuse('latest_pointer: a key row keeps its identity');
    END IF;
    IF NEW.latest_session_id IS DISTINCT FROM OLD.latest_session_id AND (
        NOT EXISTS (
            SELECT 1 FROM segments
            WHERE session_id = NEW.latest_session_id AND key = NEW.key AND archived_at IS NULL
        )
        OR NOT EXISTS (
            SELECT 1 FROM segments
            WHERE session_id = OLD.latest_session_id AND archived_at IS NOT NULL
        )
    ) THEN
        PERFORM sg_refuse(
            'latest_pointer: may only move from an archived to an unarchived segment');
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER session_keys_guard BEFORE INSERT OR UPDATE OR DELETE ON session_keys
    FOR EACH ROW EXECUTE FUNCTION sg_session_keys_guard();
CREATE TRIGGER session_keys_no_truncate BEFORE TRUNCATE ON session_keys
    FOR EACH STATEMENT EXECUTE FUNCTION sg_no_truncate();

-- Rotation log: append-only.
CREATE FUNCTION sg_rotations_guard() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' OR NOT sg_being_erased(OLD.key) THEN
        PERFORM sg_refuse('rotation_log: append-only');
    END IF;
    RETURN OLD;
END;
$$;
CREATE TRIGGER rotations_guard BEFORE UPDATE OR DELETE ON rotations
    FOR EACH ROW EXECUTE FUNCTION sg_rotations_guard();
CREATE TRIGGER rotations_no_truncate BEFORE TRUNCATE ON rotations
    FOR EACH STATEMENT EXECUTE FUNCTION sg_no_truncate();
