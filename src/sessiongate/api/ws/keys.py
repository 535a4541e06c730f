"""Which key a WebSocket's frames land on, and whether a seed endpoint may use it.

A frame that names no key uses the socket's default: `?session_id=`, else on `/v1/ws`
the route (DESIGN.md §8, decided again for each frame, so a mode unlocked since the
socket opened counts), else on seed 001's endpoints the key the user last used there.
Seed 001's two endpoints never share a key (service/seed_endpoints.py); a key whose
binding can no longer change is checked once per socket."""

from __future__ import annotations

from collections.abc import Mapping

from sessiongate.api.auth import caller_for, routes_of
from sessiongate.core.keys import SEED_ENDPOINTS, KeyRef
from sessiongate.core.routing import RouteDecision
from sessiongate.core.users import User
from sessiongate.errors import InvalidInput, SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.seed_endpoints import SeedEndpoints


class SocketKeys:
    """One socket's key choice: its default key, per-frame routing, endpoint bindings."""

    def __init__(
        self, engine: Engine, seed: SeedEndpoints, endpoint: str, query: Mapping[str, str]
    ) -> None:
        self.engine = engine
        self.seed = seed
        self.endpoint = endpoint
        self.query = query
        #: `/v1/ws` without `?session_id=`: frames that name no key are routed one by one.
        self.routed = False
        #: Keys whose endpoint binding was checked and cannot change any more.
        self._settled: set[str] = set()

    async def default_key(self, user: User) -> str:
        """The key of frames that name none: `?session_id=`, else on `/v1/ws` the route
        (DESIGN.md §8), else on seed 001's endpoints the key the user last used there
        (`mobile:<endpoint>:<user>` the first time)."""
        requested = self.query.get("session_id")
        if requested:
            try:
                ref = caller_for(user).key(requested, write=True)
            except SessionGateError:
                return requested  # a bad key in the URL is reported when a message uses it
            await self.check_endpoint(ref)  # raises WrongEndpoint: reported, then closed
            return requested
        if self.endpoint == "v1":
            self.routed = True
            return (await self.route(user, None)).key
        last = await self.seed.last_key(user.name, self.endpoint)
        return last or f"mobile:{self.endpoint}:{user.name}"

    def unsettled(self, ref: KeyRef) -> bool:
        """Whether `ref` still needs the seed endpoints' check on this socket."""
        return self.endpoint in SEED_ENDPOINTS and ref.storage_id not in self._settled

    async def check_endpoint(self, ref: KeyRef) -> None:
        """Seed endpoints: refuse a key the other one created (service/seed_endpoints.py)."""
        if not self.unsettled(ref):
            return
        if await self.seed.check(ref, self.endpoint):
            self._settled.add(ref.storage_id)

    async def route(self, user: User, mode: object) -> RouteDecision:
        """The route for a frame: its own `mode`, else the URL's; the URL's channel and
        device."""
        query = self.query
        if mode is None:
            mode = query.get("mode")
        if mode is not None and not isinstance(mode, str):
            raise InvalidInput("mode must be a string", code="invalid_mode")
        return await routes_of(self.engine).decide(
            user,
            channel=query.get("channel") or "ws",
            mode=mode,
            device=query.get("device_id"),
        )
