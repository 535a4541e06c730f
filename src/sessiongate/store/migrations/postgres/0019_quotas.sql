-- Quotas (DESIGN.md §15, core/quotas.py): a user's own limits, which win over the
-- [quotas] defaults (NULL: the default applies), and the counters every gateway shares.
-- A counter row is one user's use of one quota in one window (`window_start` in seconds
-- since the epoch, UTC): admitting a request is one atomic INSERT ... ON CONFLICT DO
-- UPDATE on it, so two gateways can never both admit the last request. Rows of windows
-- that have ended are pruned when the user's next window starts.

ALTER TABLE users ADD COLUMN quota_requests_per_minute BIGINT
    CHECK (quota_requests_per_minute >= 0);
ALTER TABLE users ADD COLUMN quota_tokens_per_day BIGINT CHECK (quota_tokens_per_day >= 0);

CREATE TABLE quota_counters (
    user_name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('requests_per_minute', 'tokens_per_day')),
    window_start BIGINT NOT NULL,
    used BIGINT NOT NULL CHECK (used >= 0),
    PRIMARY KEY (user_name, kind, window_start)
);
