-- A conversation's title (core/titles.py): the one its user set with
-- PATCH /v1/sessions/{key}. NULL (every key until then) means the automatic title, made
-- when the key is listed from the first user message of its first segment, so keys made
-- before this migration have one too and no turn writes anything more.

ALTER TABLE session_keys ADD COLUMN title TEXT;
