-- OpenAI-compatible conversations (DESIGN.md §11); SQLite's 0013 in PostgreSQL's terms.
--
-- 1. The rotation reason `fork`: a client re-sent its conversation with an earlier message
--    edited, and a new segment continues the shared part.
-- 2. The conversation index (store/conversations_base.py): one node per message as the
--    client sees it, named by the rolling hash of its branch, and each key's head. Derived
--    data beside the append-only history; erased with its key.

ALTER TABLE rotations DROP CONSTRAINT rotations_reason_check;
ALTER TABLE rotations ADD CONSTRAINT rotations_reason_check
    CHECK (reason IN ('manual', 'idle', 'day_boundary', 'semantic', 'revert', 'fork'));

CREATE TABLE conversation_nodes (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key TEXT COLLATE "C" NOT NULL,
    owner TEXT COLLATE "C" NOT NULL,
    hash TEXT COLLATE "C" NOT NULL,
    parent TEXT COLLATE "C" NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    session_id TEXT COLLATE "C",
    message_ids TEXT NOT NULL DEFAULT '[]',
    UNIQUE (key, hash)
);
CREATE INDEX conversation_nodes_by_owner ON conversation_nodes (owner, hash);

CREATE TABLE conversation_heads (
    key TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    hash TEXT COLLATE "C" NOT NULL,
    position INTEGER NOT NULL,
    moved_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX conversation_heads_by_owner ON conversation_heads (owner, hash);
