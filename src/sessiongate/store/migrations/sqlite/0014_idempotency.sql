-- Exactly-once turns (DESIGN.md §11, docs/api.md "Idempotent turns"): a request carrying
-- an `Idempotency-Key` (or `client_message_id`) claims its row before the turn runs
-- (`running`); the turn's outcome is kept when it ends (`done`), so a retry is answered
-- from it. Scoped per owner: two users' equal keys are two rows. `fingerprint` is a hash
-- of the request's meaningful fields; `result` is JSON. Times are microseconds since the
-- epoch; rows older than `limits.idempotency_retention` are removed.

CREATE TABLE idempotency_keys (
    owner TEXT NOT NULL,
    idem_key TEXT NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 200),
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done')),
    result TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (owner, idem_key)
);

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
