-- Exactly-once turns (DESIGN.md §11, docs/api.md "Idempotent turns"): a request carrying
-- an `Idempotency-Key` (or `client_message_id`) claims its row before the turn runs
-- (`running`, which a concurrent retry in another process waits on); the turn's outcome
-- is kept when it ends (`done`). Scoped per owner. `result` is JSON text.

CREATE TABLE idempotency_keys (
    owner TEXT NOT NULL,
    idem_key TEXT NOT NULL CHECK (char_length(idem_key) BETWEEN 1 AND 200),
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done')),
    result TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner, idem_key)
);

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
