"""Configuration of quotas (DESIGN.md §15): the default limits every user has unless an
admin set their own (`PATCH /v1/users/{name} {"quotas": {...}}`). Unset: unlimited.
Enforced across every gateway on the database (service/quotas.py, docs/operations.md)."""

from __future__ import annotations

from pydantic import Field

from sessiongate.config.base import Section
from sessiongate.core.quotas import MAX_LIMIT, QuotaLimits


class QuotasConfig(Section):
    #: Turns a user may start per minute (UTC minutes), over every transport and gateway.
    requests_per_minute: int | None = Field(None, ge=0, le=MAX_LIMIT)
    #: Tokens (prompt + completion) a user's turns may use per UTC day; a turn is refused
    #: once the day's total reached it.
    tokens_per_day: int | None = Field(None, ge=0, le=MAX_LIMIT)

    def defaults(self) -> QuotaLimits:
        return QuotaLimits(self.requests_per_minute, self.tokens_per_day)
