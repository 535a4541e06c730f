"""Configuration of artifacts: where their bytes are kept (a local folder, or the database
every gateway shares) and the optional copy of every artifact to a WebDAV folder
(DESIGN.md §9 and §15; seed 000 used Nextcloud).

The credentials never sit in the file: `username_env` and `password_env` name the
environment variables that hold them, read once at start-up (a set `webdav_url` with a
variable missing refuses to start, naming it; `service/artifact_copy.py`).
"""

from __future__ import annotations

import re
import string
from datetime import timedelta
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from sessiongate.config.base import Duration, Section

#: What `layout` may say: these placeholders, and literal text of these characters.
LAYOUT_FIELDS = frozenset({"owner", "key", "artifact_id", "ext", "date"})
_LAYOUT_LITERAL = re.compile(r"[A-Za-z0-9._@/-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def layout_fields(layout: str) -> list[str]:
    """The placeholders of a layout, in order; ValueError for anything else in braces or
    a literal character outside `A-Z a-z 0-9 . _ @ / -`."""
    found: list[str] = []
    try:
        parsed = list(string.Formatter().parse(layout))
    except ValueError as exc:
        raise ValueError(f"layout {layout!r}: {exc}") from None
    for literal, name, spec, conversion in parsed:
        if not _LAYOUT_LITERAL.fullmatch(literal):
            raise ValueError(
                f"layout {layout!r}: literal text may hold only letters, digits and . _ @ / -"
            )
        if name is None:
            continue
        if name not in LAYOUT_FIELDS or spec or conversion:
            known = ", ".join("{" + f + "}" for f in sorted(LAYOUT_FIELDS))
            raise ValueError(f"layout {layout!r}: {{{name}}} is not one of {known}")
        found.append(name)
    return found


class ArtifactsConfig(Section):
    #: Where artifact bytes are kept: `local` (files under data_dir/artifacts) or
    #: `database` (chunks in the database every gateway shares; DESIGN.md §15).
    store: Literal["local", "database"] = "local"
    #: A WebDAV folder (`https://cloud.example.org/remote.php/dav/files/<user>/sessiongate/`)
    #: every kept artifact is copied to, in the background; unset: no copies.
    webdav_url: str | None = None
    #: The environment variables holding the WebDAV user name and password (a Nextcloud
    #: app password). Both unset (`""`): no authentication.
    username_env: str = "SESSIONGATE_WEBDAV_USERNAME"
    password_env: str = "SESSIONGATE_WEBDAV_PASSWORD"
    #: One WebDAV request (MKCOL, PUT or DELETE).
    timeout: Duration = timedelta(seconds=30)
    #: Tries per copy (and per deletion of a copy) before it is given up.
    max_attempts: int = Field(10, ge=1, le=100)
    #: The wait after the first failed try; it doubles after each one, up to an hour.
    retry_backoff: Duration = timedelta(seconds=30)
    #: Where a copy goes under `webdav_url`; `/` separates folders.
    layout: str = "{owner}/{key}/{artifact_id}.{ext}"
    #: `{owner}` and `{key}` as digests (the first 32 hex digits of a SHA-256), so the
    #: WebDAV server never learns user or conversation names; false: the names.
    hash_names: bool = True
    #: Erasing a key (or a user) deletes its artifacts' copies too.
    delete_remote: bool = True

    @field_validator("webdav_url")
    @classmethod
    def _folder_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("webdav_url must be an http:// or https:// URL")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "webdav_url must not hold credentials: name environment variables in"
                " username_env and password_env instead"
            )
        if parts.query or parts.fragment:
            raise ValueError("webdav_url must be a folder URL, without ?query or #fragment")
        url = parts.geturl()
        return url if url.endswith("/") else url + "/"

    @field_validator("username_env", "password_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if value and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an environment variable name")
        return value

    @field_validator("layout")
    @classmethod
    def _layout(cls, value: str) -> str:
        fields = layout_fields(value)
        if "artifact_id" not in fields:
            raise ValueError(f"layout {value!r} must contain {{artifact_id}} (copies are per id)")
        segments = value.split("/")
        if any(s in ("", ".", "..") for s in segments):
            raise ValueError(
                f"layout {value!r}: no empty, `.` or `..` folder, and no leading or trailing /"
            )
        return value

    @field_validator("timeout", "retry_backoff")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0) or value > timedelta(hours=1):
            raise ValueError("must be more than 0 and at most 1h")
        return value

    @model_validator(mode="after")
    def _both_or_neither(self) -> ArtifactsConfig:
        if bool(self.username_env) != bool(self.password_env):
            raise ValueError(
                'set both username_env and password_env, or neither ("" for a WebDAV'
                " server without authentication)"
            )
        return self
