"""Per-session overrides: which reply and control model a key uses, and its lifecycle.

One validation serves `PATCH /v1/sessions/{key}` and import, so an override that could
break later turns (`{"reply_model": ["x"]}`, an idle window of 10**18 days, an unknown
model) is refused wherever it comes from, with the same code.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sessiongate.config.lifecycle import parse_day_boundary
from sessiongate.core.rotation import LifecyclePolicy
from sessiongate.durations import parse_optional_duration
from sessiongate.errors import InvalidInput, NotFound


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LifecycleOverrides(_Strict):
    idle_window: str | None = Field(None, max_length=64)
    day_boundary: str | None = Field(None, max_length=16)
    semantic_enabled: bool | None = None
    semantic_threshold: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)


class SessionOverrides(_Strict):
    control_model: str | None = Field(None, max_length=200)
    reply_model: str | None = Field(None, max_length=200)
    lifecycle: LifecycleOverrides | None = None


class OverrideTargets:
    """The model names an override may point at (None: any name, for engines built
    without a model registry)."""

    def __init__(
        self,
        reply_models: Collection[str] | None = None,
        control_models: Collection[str] | None = None,
    ) -> None:
        self.reply_models = None if reply_models is None else frozenset(reply_models)
        self.control_models = None if control_models is None else frozenset(control_models)


def validate_overrides(
    data: object, policy: LifecyclePolicy, targets: OverrideTargets
) -> dict[str, Any]:
    """The overrides as stored (unset fields left out), or InvalidInput / NotFound naming
    the first problem."""
    try:
        parsed = SessionOverrides.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidInput(
            f"override {where or '(top level)'}: {first['msg']}", code="invalid_override"
        ) from None
    for field, allowed in (
        ("reply_model", targets.reply_models),
        ("control_model", targets.control_models),
    ):
        name = getattr(parsed, field)
        if name is not None and allowed is not None and name not in allowed:
            raise NotFound(f"{field} {name!r} is not a configured model", code="model_not_found")
    cleaned = parsed.model_dump(exclude_none=True)
    if "lifecycle" in cleaned:
        if not cleaned["lifecycle"]:
            del cleaned["lifecycle"]
        else:
            apply_lifecycle_overrides(policy, cleaned["lifecycle"])  # values parse
    return cleaned


def merge_overrides(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """PATCH semantics: a None value removes that override; lifecycle merges field by
    field."""
    merged = dict(current)
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)
        elif name == "lifecycle" and isinstance(value, dict):
            lifecycle = dict(merged.get("lifecycle") or {})
            lifecycle.update(value)
            merged["lifecycle"] = {k: v for k, v in lifecycle.items() if v is not None}
        else:
            merged[name] = value
    return merged


def apply_lifecycle_overrides(
    policy: LifecyclePolicy, overrides: dict[str, Any]
) -> LifecyclePolicy:
    """Per-key lifecycle overrides: idle_window, day_boundary, semantic_enabled,
    semantic_threshold. Raises InvalidInput naming the bad field."""
    try:
        result = policy
        if "idle_window" in overrides:
            result = replace(result, idle_window=parse_optional_duration(overrides["idle_window"]))
        if "day_boundary" in overrides:
            result = replace(result, day_boundary=parse_day_boundary(overrides["day_boundary"]))
        semantic = result.semantic
        if "semantic_enabled" in overrides:
            semantic = replace(semantic, enabled=bool(overrides["semantic_enabled"]))
        if "semantic_threshold" in overrides:
            semantic = replace(semantic, threshold=float(overrides["semantic_threshold"]))
        return replace(result, semantic=semantic)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"lifecycle override: {exc}", code="invalid_override") from None
