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
