-- Session keys live in their owner's namespace: two users may both have `notes`, and one
-- can no longer take another's default route key (`agent:main:main`, `chat:carol`) first.
-- The stored key becomes `owner/key` (neither a user name nor a key may hold `/`), so
-- every table, trigger, lock and NOTIFY payload that names a key keeps working unchanged.
--
-- The guards that forbid rewriting a key are switched off for this one transaction (the
-- migration runs in a single transaction under the migration lock) and back on after.

ALTER TABLE segments DISABLE TRIGGER segments_guard;
ALTER TABLE session_keys DISABLE TRIGGER session_keys_guard;
ALTER TABLE rotations DISABLE TRIGGER rotations_guard;

UPDATE segments s SET key = k.owner || '/' || k.key FROM session_keys k WHERE k.key = s.key;
UPDATE rotations r SET key = k.owner || '/' || k.key FROM session_keys k WHERE k.key = r.key;
UPDATE session_keys SET key = owner || '/' || key;

-- The keys' foreign keys are deferred; check them now, since a table with pending
-- constraint events cannot be altered (and every row must agree before the guards return).
SET CONSTRAINTS ALL IMMEDIATE;

ALTER TABLE segments ENABLE TRIGGER segments_guard;
ALTER TABLE session_keys ENABLE TRIGGER session_keys_guard;
ALTER TABLE rotations ENABLE TRIGGER rotations_guard;
