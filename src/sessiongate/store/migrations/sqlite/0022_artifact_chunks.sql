-- Artifact bytes in the database (`[artifacts] store = "database"`, DESIGN.md §15). An
-- artifact's bytes are rows of at most 256 KiB each, numbered from 0, so a download reads
-- one chunk at a time and an upload writes one at a time: nothing holds a whole artifact
-- in memory. Chunks are written before their artifact's row and removed after it (as
-- files are); `owner` lets a user's erasure sweep any chunk whose row never came.

CREATE TABLE artifact_chunks (
    artifact_id TEXT NOT NULL,
    seq INTEGER NOT NULL CHECK (seq >= 0),
    owner TEXT NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (artifact_id, seq)
);

CREATE INDEX artifact_chunks_by_owner ON artifact_chunks (owner);
