"""The keyless callers of the seed clients that send no API key: seed 004's desktop
client (`GET /ai`, `compat.desktop_user`) and seed 002's front end (`POST /chat`,
`compat.lifehub_user`). One rule for both.

A request without an `Authorization` header runs as the configured user only when it
plainly comes from a program on this machine:

- its peer is a loopback address (`127.0.0.1`, `::1`);
- it was addressed to this machine by a loopback name (`Host` is `localhost`,
  `127.0.0.1` or `[::1]`), so a web page whose own name was made to resolve to 127.0.0.1
  (DNS rebinding) is not let in;
- and it is not a web page of another origin acting through the user's browser: a
  request with an `Origin` header must come from one of `[server] cors_origins`, and one
  without must not be marked cross-site by the browser (`Sec-Fetch-Site`). Otherwise any
  page the user visits could run turns (and a desktop agent's scripts) by a plain link
  or form.

Anything else, and every request that sends a key, is authenticated by its key as
everywhere (a key that is sent is always checked).
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi import Request

from sessiongate.api.auth import current_user
from sessiongate.core.users import User
from sessiongate.errors import Unauthorized
from sessiongate.service.engine import Engine

#: The peer addresses of this machine's own programs.
LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})
#: The names a request to this machine's loopback interface is addressed by.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: `Sec-Fetch-Site` values of a request no other site started.
_OWN_FETCH = frozenset({"none", "same-origin"})


def host_name(host: str | None) -> str | None:
    """The name part of a `Host` header: `localhost:8080` → `localhost`, `[::1]:80` →
    `::1`; None for a missing or malformed one."""
    if not host:
        return None
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else None
    name, _, _ = host.partition(":")
    return name or None


def keyless_allowed(
    *,
    peer: str | None,
    host: str | None,
    origin: str | None,
    fetch_site: str | None,
    allowed_origins: Collection[str],
) -> bool:
    """Whether a request without a key may run as the configured keyless user (the rule
    in this module's docstring). Pure: the request's facts in, the answer out."""
    if peer not in LOOPBACK or host_name(host) not in LOOPBACK_NAMES:
        return False
    if origin is not None:
        return origin in allowed_origins
    return fetch_site is None or fetch_site.lower() in _OWN_FETCH


async def keyless_or_keyed_user(request: Request, fallback: str | None, setting: str) -> User:
    """The caller: its API key as everywhere; or `fallback` (the user named by `setting`,
    e.g. `compat.desktop_user`) for a request without an `Authorization` header that
    `keyless_allowed` lets in."""
    engine: Engine = request.app.state.engine
    if fallback is None or "authorization" in request.headers:
        return await current_user(request)
    allowed = keyless_allowed(
        peer=request.client.host if request.client is not None else None,
        host=request.headers.get("host"),
        origin=request.headers.get("origin"),
        fetch_site=request.headers.get("sec-fetch-site"),
        allowed_origins=engine.settings.server.cors_origins,
    )
    if not allowed:
        return await current_user(request)
    user = await engine.users.users.get_user(fallback)
    if user is None:
        raise Unauthorized(f"{setting} {fallback!r} is not a user of this gateway")
    request.state.user = user
    return user


async def desktop_user(request: Request) -> User:
    """Seed 004's `GET /ai` (and its audio): `compat.desktop_user` when keyless."""
    engine: Engine = request.app.state.engine
    fallback = engine.settings.compat.desktop_user
    return await keyless_or_keyed_user(request, fallback, "compat.desktop_user")


async def lifehub_user(request: Request) -> User:
    """Seed 002's `POST /chat`: `compat.lifehub_user` when keyless."""
    engine: Engine = request.app.state.engine
    fallback = engine.settings.compat.lifehub_user
    return await keyless_or_keyed_user(request, fallback, "compat.lifehub_user")
