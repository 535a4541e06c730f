"""Webhooks, the pure part: a delivery's body, its signature and the wait before a retry
(DESIGN.md §9, docs/hooks.md). No I/O here; `service/hooks.py` queues,
`service/hook_sender.py` sends.

A body is `{"id", "event", "created_at", "data"}` as compact JSON. Each attempt is
signed afresh: `X-Sessiongate-Timestamp` is the attempt's Unix time in seconds and
`X-Sessiongate-Signature` is `sha256=` and the hex HMAC-SHA256, keyed with the hook's
secret, of the timestamp, a `.`, and the body's bytes exactly as sent. A receiver
recomputes it over the raw body, compares in constant time (`verify_signature`) and
refuses a timestamp far from its own clock, so a captured request cannot be replayed
later; `X-Sessiongate-Delivery` (the body's `id`) stays the same across retries, so a
receiver can drop a delivery it already has.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

SIGNATURE_HEADER = "X-Sessiongate-Signature"
TIMESTAMP_HEADER = "X-Sessiongate-Timestamp"
EVENT_HEADER = "X-Sessiongate-Event"
DELIVERY_HEADER = "X-Sessiongate-Delivery"
SIGNATURE_PREFIX = "sha256="
#: How far a receiver should let a timestamp be from its clock (verify_signature's default).
DEFAULT_TOLERANCE_SECONDS = 300
#: A stored error is short: a status line or an exception's class, never a body.
MAX_ERROR_CHARS = 200


def iso(value: datetime) -> str:
    """An instant as the API spells it (`2026-03-02T09:00:00.123456Z`)."""
    return value.isoformat().replace("+00:00", "Z")


def delivery_body(
    delivery_id: str, event: str, created_at: datetime, data: Mapping[str, Any]
) -> str:
    """The JSON body of one delivery, as stored and sent (compact, UTF-8 text)."""
    envelope = {"id": delivery_id, "event": event, "created_at": iso(created_at), "data": data}
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of `<timestamp>.<body>` keyed with the secret."""
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return SIGNATURE_PREFIX + mac.hexdigest()


def verify_signature(
    secret: bytes,
    timestamp_header: str,
    signature_header: str,
    body: bytes,
    now: float,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """A receiver's check (also what docs/hooks.md shows): the signature matches the raw
    body, compared in constant time, and the timestamp is within the tolerance of `now`
    (Unix seconds)."""
    try:
        timestamp = int(timestamp_header)
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = signature(secret, timestamp, body)
    return hmac.compare_digest(expected.encode(), signature_header.strip().encode())


def retry_delay(
    attempts: int,
    base: timedelta,
    cap: timedelta,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> timedelta:
    """The wait after the `attempts`-th failed attempt: `base * 2**(attempts-1)` up to
    `cap`, then "equal jitter" (a uniform draw between half of it and all of it), so
    deliveries that failed together do not retry together. A receiver's `Retry-After`
    (seconds) is honoured when longer, still at most `cap`."""
    exponent = max(attempts - 1, 0)
    step = base.total_seconds() * (2 ** min(exponent, 40))
    ceiling = min(step, cap.total_seconds())
    draw = (rng or random).uniform(ceiling / 2, ceiling)
    if retry_after is not None and retry_after > draw:
        draw = min(retry_after, cap.total_seconds())
    return timedelta(seconds=draw)


def short_error(text: str) -> str:
    """One line, at most MAX_ERROR_CHARS, for `last_error`."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 1] + "…"


#: Where a webhook delivery stands: waiting (or retrying), done, or given up.
DeliveryStatus = Literal["pending", "delivered", "failed"]
DELIVERY_STATUSES: tuple[DeliveryStatus, ...] = ("pending", "delivered", "failed")
