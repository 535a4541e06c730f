"""Configuration of the database (`[database]`): SQLite or PostgreSQL by URL, SQLite's
durability, PostgreSQL's pool size; and the URL without its password, wherever one is
shown."""

from __future__ import annotations

from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field, field_serializer, field_validator

from sessiongate.config.base import Section


class DatabaseConfig(Section):
    #: Empty or `sqlite:///path`: SQLite. `postgresql://user@host:port/db` (or postgres://):
    #: PostgreSQL, shared by any number of gateway processes.
    url: str = ""
    #: SQLite durability: "normal" loses nothing on a process crash; "full" also survives
    #: power loss at the cost of an fsync per commit.
    synchronous: Literal["normal", "full", "extra"] = "normal"
    #: PostgreSQL: connections per pool, per process (one pool for queries and one for
    #: the per-key advisory locks).
    pool_size: int = Field(10, ge=1, le=1000)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value or value.startswith("sqlite:///"):
            return value
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme not in ("postgresql", "postgres"):
            # Only the scheme is echoed: the rest may hold a password.
            raise ValueError(
                "expected sqlite:///path or postgresql://user@host:port/database"
                f" (got scheme {scheme or 'none'!r})"
            )
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
        except ValueError as exc:
            raise ValueError(f"not a valid PostgreSQL URL: {exc}") from None
        if any(c.isspace() for c in value):
            raise ValueError("not a valid PostgreSQL URL: it contains whitespace")
        return value

    @field_serializer("url", when_used="json")
    def _mask_url(self, value: str) -> str:
        # `config check` prints the settings: never the database password.
        return redact_url(value)

    @property
    def backend(self) -> Literal["sqlite", "postgres"]:
        return "postgres" if self.url.startswith(("postgresql://", "postgres://")) else "sqlite"


def redact_url(url: str) -> str:
    """The URL without its password (in the user part or a password= parameter)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if parts.password is None and not any(k == "password" for k, _ in pairs):
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in pairs if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
