-- Retention, backup and restore, and API-key rotation (docs/operations.md) need no change
-- to the schema: retention finds idle keys through the latest pointer and archives by an
-- ordinary rotation or erases by the erasure path; rotation revokes keys through
-- `api_keys.revoked_at`. This number was reserved for them and stays, so the migrations
-- are numbered 1..n.
SELECT 1;
