"""Erasing a user and everything derived from them: `sessiongate users erase NAME` and
`DELETE /v1/users/{name}` (docs/operations.md "Erasing a user").

The steps, in this order:

1. Revoke every API key of the user, so no new request of theirs starts while the rest
   goes (a request already past authentication may still finish its turn: step 2 runs
   until no key is left).
2. Their artifacts (rows and files; WebDAV copies are deleted in the background, as for
   a key), through the artifact service.
3. Every session key they own, through `DELETE /v1/sessions/{key}`'s own path
   (`SessionService.delete`, under the key's lock): segments, messages, rotation log,
   search rows, and every erase hook — the key's conversation index rows, its queued
   webhook deliveries, seed 001's endpoint memory, anything made since step 2. Then
   their tasks, through the task service.
4. One transaction for the rest (store/user_erasure.py): notes with their chunks,
   keyword index rows and vectors, memory items with their vectors and tombstones,
   mode unlocks, idempotency records, conversation index
   rows, endpoint memory, every webhook delivery that names them, their API keys and
   last the user's row, with its enabled modes.

The user's row goes last, so an erasure interrupted half-way (a crash, a database that
went away) leaves a user that cannot authenticate and can be erased again. One audit log
line records who erased whom and how many rows of each kind went; never any content.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from sessiongate.core.users import Caller, validate_user_name
from sessiongate.errors import Conflict, SessionNotFound
from sessiongate.service.engine import Engine
from sessiongate.service.modes import UserNotFound
from sessiongate.store.base import Store
from sessiongate.store.user_erasure import UserErasureStore

log = logging.getLogger("sessiongate.audit")

#: Passes over the user's session keys before giving up: a turn authenticated before the
#: keys were revoked can create a key while the first pass runs; none can after it ends.
KEY_PASSES = 3
#: Who erased a user from the command line (the audit line's `by`).
OPERATOR = "operator (cli)"


class CannotEraseSelf(Conflict):
    code = "cannot_erase_self"


class ErasureIncomplete(Conflict):
    """Session keys kept appearing (turns still running); the user is left in place,
    revoked, and the erasure can be run again."""

    code = "erasure_incomplete"


@dataclass(slots=True)
class ErasureReport:
    user: str
    #: How many of each kind went: `session_keys`, `artifacts`, `tasks`, and the tables
    #: of the final step (`notes`, `note_chunks`, `api_keys`, `users`, …).
    counts: Counter[str] = field(default_factory=Counter)


class UserErasure:
    def __init__(self, engine: Engine, rows: UserErasureStore) -> None:
        self.engine = engine
        self.rows = rows

    async def erase(self, name: str, *, by: str) -> ErasureReport:
        """Erase the user `name`; `by` names who asked (an admin, or OPERATOR). Raises
        UserNotFound, or CannotEraseSelf when `by` is that user."""
        engine = self.engine
        checked = validate_user_name(name)
        if by == checked:
            raise CannotEraseSelf(
                "an admin cannot erase their own user; another admin, or"
                " `sessiongate users erase` on the server, can"
            )
        if await engine.users.users.get_user(checked) is None:
            raise UserNotFound(f"no user {checked!r}")
        report = ErasureReport(checked)
        await engine.users.users.revoke_keys(checked, engine.sessions.clock.now())
        if engine.artifacts is not None:
            # Before the keys, so every artifact is counted here, not by the keys' hooks.
            report.counts["artifacts"] = await engine.artifacts.erase_user(checked)
        report.counts["session_keys"] = await self._erase_keys(checked)
        if engine.tasks is not None:
            report.counts["tasks"] = await engine.tasks.erase_user(checked)
        report.counts.update(await self.rows.erase_owner_rows(checked))
        if engine.notes is not None:
            engine.notes.forget_owner(checked)
        if engine.memory is not None:
            engine.memory.forget_owner(checked)
        # Names and counts only: what went is never logged, just how much of it.
        log.info("user erased", extra={"erased_user": checked, "by": by, **report.counts})
        return report

    async def _erase_keys(self, owner: str) -> int:
        sessions = self.engine.sessions
        caller = Caller(owner)
        erased = 0
        for _ in range(KEY_PASSES):
            names = await self.rows.owned_key_names(owner)
            if not names:
                return erased
            for key_name in names:
                try:
                    await sessions.delete(key_name, caller)
                    erased += 1
                except SessionNotFound:
                    pass  # erased meanwhile (retention, or the owner's own DELETE)
        if await self.rows.owned_key_names(owner):
            raise ErasureIncomplete(
                f"{owner!r} still has session keys in use; their API keys are revoked,"
                " run the erasure again once their turns have ended"
            )
        return erased


def user_erasure(engine: Engine) -> UserErasure:
    """The erasure over the engine's store (same connection or pool)."""
    return UserErasure(engine, erasure_rows(engine.store))


def erasure_rows(store: Store) -> UserErasureStore:
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.user_erasure import SQLiteUserErasureStore

        return SQLiteUserErasureStore(store)
    # Imported here so a SQLite gateway never loads the driver.
    from sessiongate.store.postgres.store import PostgresStore
    from sessiongate.store.postgres.user_erasure import PostgresUserErasureStore

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no user erasure for {type(store).__name__}")
    return PostgresUserErasureStore(store)
