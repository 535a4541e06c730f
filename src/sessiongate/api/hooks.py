"""`GET /v1/hooks/deliveries` (admins): the webhook queue, for inspection (docs/hooks.md).

    GET /v1/hooks/deliveries?hook=&status=&limit=
        -> {hooks: [{name, url, events}], counts: {hook: {status: n}}, stats: {...},
            deliveries: [{id, hook, event, status, attempts, next_attempt_at, last_error,
                          delivered_at, failed_at, created_at}, ... newest first]}

Bodies are never shown (they may hold message text); a hook's URL is shown without its
user part and query. `stats` counts this process's work since it started (queued,
delivered, retried, failed, dropped).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from sessiongate.api.modes import AdminUser
from sessiongate.core.hooks import DELIVERY_STATUSES, DeliveryStatus
from sessiongate.errors import InvalidInput
from sessiongate.service.engine import Engine
from sessiongate.service.hooks import delivery_json

router = APIRouter(prefix="/v1")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@router.get("/hooks/deliveries")
async def list_deliveries(
    admin: AdminUser,
    request: Request,
    hook: str | None = None,
    status: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    wanted = DEFAULT_LIMIT if limit is None else limit
    if not 1 <= wanted <= MAX_LIMIT:
        raise InvalidInput(f"limit must be from 1 to {MAX_LIMIT}", code="invalid_limit")
    checked: DeliveryStatus | None = None
    if status is not None:
        if status not in DELIVERY_STATUSES:
            raise InvalidInput("status must be pending, delivered or failed", code="invalid_status")
        checked = status
    hooks = engine.hooks
    if hooks is None:
        return {"hooks": [], "counts": {}, "stats": {}, "deliveries": []}
    found = await hooks.store.list_deliveries(hook, checked, wanted)
    return {
        "hooks": hooks.describe(),
        "counts": await hooks.store.counts(),
        "stats": dict(hooks.stats),
        "deliveries": [delivery_json(d) for d in found],
    }
