"""The caller, their modes, and an admin's view of users (DESIGN.md §8).

    GET   /v1/me                      -> {name, primary, admin, modes: [...], unlocks: [...]}
    POST  /v1/modes/{mode}/unlock {ttl?}  -> {mode, unlocked_at, expires_at}
    POST  /v1/modes/{mode}/lock       -> {mode, locked: true, locked_at, ended}
    GET   /v1/users                   -> {users: [{name, primary, admin, modes_enabled}]}  (admin)
    GET   /v1/me/quotas               -> {quotas: {<quota>: {limit, used, own, resets_in}}}
    GET   /v1/users/{name}            -> {name, ..., quotas, quota_usage}  (admin)
    PATCH /v1/users/{name} {modes_enabled?, quotas?}  -> {name, ..., quotas}  (admin)
    DELETE /v1/users/{name}           -> {erased, counts: {...}}  (admin; service/user_erasure.py)

`{mode:path}` takes a name with a slash in it too (`..%2Fx`), so that it is refused
as 400 `invalid_mode` like any other bad name rather than missing every route.

A user unlocks and locks only their own modes; only an admin enables them. The admin
check runs as a dependency, before the body is validated or the user looked up, so anyone
else gets 403 `admin_required` and learns nothing about who exists.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import CurrentUser
from sessiongate.api.schemas import iso
from sessiongate.core.modes import ModeUnlock
from sessiongate.core.quotas import QuotaLimits, parse_overrides
from sessiongate.core.users import User, validate_user_name
from sessiongate.durations import MAX_DURATION, parse_duration
from sessiongate.errors import Forbidden, InvalidInput
from sessiongate.service.engine import Engine
from sessiongate.service.modes import (
    MAX_ENABLED,
    ModeNotFound,
    ModeService,
    ModeView,
    UserNotFound,
)
from sessiongate.service.quotas import NO_COUNTERS, QuotaService
from sessiongate.service.user_erasure import user_erasure

router = APIRouter(prefix="/v1")


class UnlockBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    #: A duration (`"30m"`, `"1h30m"`) or a number of seconds; unset: the mode's unlock_ttl.
    ttl: str | int | float | None = None


class UserChangesBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    #: Every mode the user has enabled afterwards (names are checked by the mode service);
    #: unset: the modes stay as they are.
    modes_enabled: list[str] | None = Field(None, max_length=MAX_ENABLED)
    #: The user's own quotas to set (a number) or clear (null: the `[quotas]` default
    #: applies again); quotas not named stay as they are (core/quotas.py).
    quotas: dict[str, Any] | None = None


async def admin_user(user: CurrentUser) -> User:
    if not user.admin:
        raise Forbidden("only an admin may see or change users", code="admin_required")
    return user


AdminUser = Annotated[User, Depends(admin_user)]


def modes_of(request: Request) -> ModeService:
    engine: Engine = request.app.state.engine
    if engine.modes is None:  # an engine built without modes has none to find
        raise ModeNotFound("no modes here")
    return engine.modes


def parse_ttl(value: str | int | float | None) -> timedelta | None:
    """`"30m"` as config durations are written, or a number of seconds. The limits (more
    than 0, at most the mode's unlock_ttl) are the service's; this only refuses what is
    not a duration at all, or too large to be one."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise InvalidInput(f"ttl: {exc}", code="invalid_ttl") from None
    # Compared before converting (timedelta(seconds=1e300) would overflow), and the bound
    # first: math.isfinite(10**400) cannot turn that int into a float.
    if abs(value) > MAX_DURATION.total_seconds() or not math.isfinite(value):
        raise InvalidInput("ttl is not a number of seconds the gateway can use", code="invalid_ttl")
    return timedelta(seconds=value)


def unlock_json(unlock: ModeUnlock) -> dict[str, Any]:
    return {
        "mode": unlock.mode,
        "unlocked_at": iso(unlock.unlocked_at),
        "expires_at": iso(unlock.expires_at),
        "unlocked_by": unlock.unlocked_by,
        "locked_at": iso(unlock.locked_at),
        "locked_by": unlock.locked_by,
    }


def view_json(view: ModeView) -> dict[str, Any]:
    seconds = view.unlock_ttl.total_seconds()
    return {
        "name": view.name,
        "enabled": view.enabled,
        "unlocked": view.unlock is not None,
        "expires_at": None if view.unlock is None else iso(view.unlock.expires_at),
        # 3600, not 3600.0; a sub-second ttl ("1500ms") keeps its fraction.
        "unlock_ttl_seconds": int(seconds) if seconds.is_integer() else seconds,
        # Whether a turn in this mode routes in it now, and if not why (the route event's
        # reason): mode_active, mode_not_enabled or mode_locked.
        "state": view.state.value,
    }


def user_json(user: User) -> dict[str, Any]:
    return {
        "name": user.name,
        "primary": user.primary,
        "admin": user.admin,
        "modes_enabled": sorted(user.modes),
        # The user's own quotas; null: the `[quotas]` default applies.
        "quotas": user.quotas.to_dict(),
    }


@router.get("/me")
async def me(user: CurrentUser, request: Request) -> dict[str, Any]:
    modes = modes_of(request)
    return {
        "name": user.name,
        "primary": user.primary,
        "admin": user.admin,
        "modes": [view_json(view) for view in await modes.overview(user)],
        "unlocks": [unlock_json(unlock) for unlock in await modes.history(user.name)],
    }


@router.post("/modes/{mode:path}/unlock")
async def unlock_mode(
    mode: str, user: CurrentUser, request: Request, body: UnlockBody | None = None
) -> dict[str, Any]:
    ttl = parse_ttl(None if body is None else body.ttl)
    unlock = await modes_of(request).unlock(user, mode, ttl)
    return {
        "mode": unlock.mode,
        "unlocked_at": iso(unlock.unlocked_at),
        "expires_at": iso(unlock.expires_at),
    }


@router.post("/modes/{mode:path}/lock")
async def lock_mode(mode: str, user: CurrentUser, request: Request) -> dict[str, Any]:
    lock = await modes_of(request).lock(user, mode)
    # `ended`: how many unlocks this lock ended; 0 when the mode was not unlocked.
    return {
        "mode": lock.mode,
        "locked": True,
        "locked_at": iso(lock.locked_at),
        "ended": len(lock.ended),
    }


@router.get("/users")
async def list_users(admin: AdminUser, request: Request) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    return {"users": [user_json(u) for u in await engine.users.users.list_users()]}


@router.get("/users/{name}")
async def show_user(name: str, admin: AdminUser, request: Request) -> dict[str, Any]:
    """One user, with their quotas' use now (`quota_usage`, as `GET /v1/me/quotas`)."""
    engine: Engine = request.app.state.engine
    user = await engine.users.users.get_user(validate_user_name(name))
    if user is None:
        raise UserNotFound(f"no user {name!r}")
    return {**user_json(user), "quota_usage": await quotas_of(engine).usage(user)}


@router.patch("/users/{name}")
async def change_user(
    name: str, admin: AdminUser, body: UserChangesBody, request: Request
) -> dict[str, Any]:
    """The modes enabled for the user, their own quotas, or both; the user afterwards."""
    engine: Engine = request.app.state.engine
    validate_user_name(name)
    if body.modes_enabled is None and body.quotas is None:
        raise InvalidInput("name modes_enabled, quotas or both", code="invalid_request")
    changes = None if body.quotas is None else parse_overrides(body.quotas)
    if body.modes_enabled is not None:
        await modes_of(request).set_enabled(admin, name, body.modes_enabled)
    if changes is not None:
        await quotas_of(engine).set_own(name, changes)
    user = await engine.users.users.get_user(name)
    if user is None:
        raise UserNotFound(f"no user {name!r}")
    return user_json(user)


@router.get("/me/quotas")
async def my_quotas(user: CurrentUser, request: Request) -> dict[str, Any]:
    """The caller's quotas: each one's limit (null: unlimited), what the current window
    used, whether it is the user's own limit, and the seconds until the window resets."""
    return {"quotas": await quotas_of(request.app.state.engine).usage(user)}


def quotas_of(engine: Engine) -> QuotaService:
    if engine.turns.quotas is None:  # an engine built without quotas has no limits
        return QuotaService(NO_COUNTERS, engine.users.users, engine.sessions.clock, QuotaLimits())
    return engine.turns.quotas


@router.delete("/users/{name}")
async def erase_user(name: str, admin: AdminUser, request: Request) -> dict[str, Any]:
    """The user and everything derived from them, gone; how many rows of each kind."""
    report = await user_erasure(request.app.state.engine).erase(name, by=admin.name)
    return {"erased": report.user, "counts": dict(sorted(report.counts.items()))}
