"""Bearer-key authentication for HTTP and the first-frame key for WebSockets."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from sessiongate.core.users import User
from sessiongate.errors import Unauthorized
from sessiongate.service.engine import Engine
from sessiongate.service.routing import RouteService
from sessiongate.service.sessions import Caller


async def current_user(request: Request) -> User:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("send your API key as `Authorization: Bearer <key>`")
    engine: Engine = request.app.state.engine
    user = await engine.users.authenticate(token.strip())
    if user is None:
        raise Unauthorized("the API key is not valid", code="invalid_api_key")
    request.state.user = user
    return user


CurrentUser = Annotated[User, Depends(current_user)]


def caller_for(user: User) -> Caller:
    return Caller(
        user.name, admin=user.admin, primary=user.primary, modes=user.modes, quotas=user.quotas
    )


def routes_of(engine: Engine) -> RouteService:
    """The engine's router (every engine built by `build_engine` has one)."""
    if engine.routes is None:
        raise RuntimeError("this engine was built without routes")
    return engine.routes
