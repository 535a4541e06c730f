"""Pages of a key listing (`GET /v1/sessions`): the page size, whose keys are listed, and
the opaque cursor that continues a listing.

Keys are listed in one fixed order, by owner then name (byte order): both are immutable
and together unique, so a cursor is simply the last key a page held. Reading on from it
never repeats a key nor skips one that existed when the listing began, however many keys
are created, used or erased between pages (a key created meanwhile is listed when it sorts
after the cursor). Recency is not an order to page by: a key used between two pages would
jump to the front and be missed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass

from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.core.segments import KeySummary
from sessiongate.core.users import Caller, validate_user_name
from sessiongate.errors import Forbidden, InvalidInput, SessionGateError

DEFAULT_PAGE = 100
MAX_PAGE = 1000
_CURSOR_VERSION = 1
#: Far more than any cursor this module writes (a 64-char owner and a 200-char key).
_MAX_CURSOR_CHARS = 1024
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class KeyPage:
    keys: list[KeySummary]
    #: Continues the listing after this page; None when this page is the last.
    next_cursor: str | None


def page_size(limit: int | str | None) -> int:
    """`?limit=` (text from a query string, or a number): 1 to MAX_PAGE keys,
    DEFAULT_PAGE when absent."""
    if limit is None:
        return DEFAULT_PAGE
    if isinstance(limit, str):
        text = limit.strip()
        # Length first: int() of thousands of digits is slow, and refused past 4300.
        if not (len(text) <= 7 and text.isascii() and text.isdigit()):
            raise _bad_limit()
        limit = int(text)
    if not 1 <= limit <= MAX_PAGE:
        raise _bad_limit()
    return limit


def listing_owner(caller: Caller, owner: str | None) -> str | None:
    """Whose keys a listing holds: the caller's own; an admin's, everyone's (None), or
    with `?owner=NAME` that one user's. Nobody else may name another owner."""
    if owner is None:
        return None if caller.admin else caller.name
    if owner == caller.name:
        return owner
    validate_user_name(owner)
    if not caller.admin:
        raise Forbidden(
            "only an admin may list another user's keys (owner=...)", code="owner_not_allowed"
        )
    return owner


def encode_cursor(scope: str | None, last: KeyRef) -> str:
    """A cursor after `last`, valid only for the listing of `scope` (an owner, or None
    for every owner) that produced it."""
    payload = {"v": _CURSOR_VERSION, "scope": scope, "after": last.storage_id}
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, scope: str | None) -> KeyRef:
    """The key a cursor continues after; InvalidInput (`invalid_cursor`) for anything
    this module did not write for this same listing."""
    if len(cursor) > _MAX_CURSOR_CHARS or not _BASE64URL.fullmatch(cursor):
        raise _bad_cursor()
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError):
        raise _bad_cursor() from None
    if not isinstance(payload, dict) or payload.get("v") != _CURSOR_VERSION:
        raise _bad_cursor()
    after = payload.get("after")
    if payload.get("scope") != scope or not isinstance(after, str):
        raise _bad_cursor("the cursor belongs to another listing")
    ref = KeyRef.from_storage_id(after)
    try:
        validate_user_name(ref.owner)
        validate_session_key(ref.name)
    except SessionGateError:
        raise _bad_cursor() from None
    if scope is not None and ref.owner != scope:
        raise _bad_cursor("the cursor belongs to another listing")
    return ref


def page_of(scope: str | None, fetched: list[KeySummary], size: int) -> KeyPage:
    """The page from up to `size + 1` keys read in listing order: the extra one only
    says another page follows."""
    if len(fetched) <= size:
        return KeyPage(fetched, None)
    keys = fetched[:size]
    last = keys[-1]
    return KeyPage(keys, encode_cursor(scope, KeyRef(last.owner, last.key)))


def _bad_limit() -> InvalidInput:
    return InvalidInput(f"limit must be a whole number from 1 to {MAX_PAGE}", code="invalid_limit")


def _bad_cursor(reason: str = "the cursor is not one this listing gave") -> InvalidInput:
    return InvalidInput(
        f"{reason}; start again without `cursor`, then pass each page's next_cursor",
        code="invalid_cursor",
    )
