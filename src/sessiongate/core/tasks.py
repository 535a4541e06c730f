"""Tasks, the pure part: what a title, a status, a due date, a task id and a page size may
be. No I/O here; the task service, `/v1/tasks` and the `tasks_*` tools all check through
these, so each refuses the same things with the same codes.

Messages never repeat the refused value: it may be megabytes long, or text written to
steer a model that reads the error.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from sessiongate.core.ids import is_session_id
from sessiongate.errors import InvalidInput

TaskStatus = Literal["open", "done"]
STATUSES: tuple[TaskStatus, ...] = ("open", "done")
#: A title is one line a person reads in a list, not a document.
MAX_TITLE_CHARS = 500
#: Tasks a listing page holds unless the caller asks for another number, and at most.
DEFAULT_PAGE = 50
MAX_PAGE = 200

# Every C0 control (tab and line breaks too: a title is one line), DEL and the C1 controls:
# a terminal, a log line or a list rendered from the title would act on them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# date.fromisoformat also takes 20260302 and 2026-W10-1; the API promises YYYY-MM-DD only.
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class InvalidTaskId(InvalidInput):
    code = "invalid_task_id"


def validate_title(title: object) -> str:
    """The title without surrounding spaces; `invalid_title` for anything else."""
    if not isinstance(title, str):
        raise InvalidInput("title must be a string", code="invalid_title")
    title = title.strip()
    if not title:
        raise InvalidInput("title must not be empty", code="invalid_title")
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidInput(
            f"title is longer than {MAX_TITLE_CHARS} characters", code="invalid_title"
        )
    try:
        title.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON \ud800 escape
        raise InvalidInput("title is not valid Unicode text", code="invalid_title") from None
    if _CONTROL.search(title):
        raise InvalidInput(
            "title must be one line without control characters", code="invalid_title"
        )
    return title


def validate_due(due: object) -> date | None:
    """A calendar date written YYYY-MM-DD, or None (no due date)."""
    if due is None:
        return None
    if isinstance(due, date):
        return due
    if not isinstance(due, str) or not _DATE.fullmatch(due):
        raise InvalidInput("due must be a date written YYYY-MM-DD, or null", code="invalid_due")
    try:
        return date.fromisoformat(due)
    except ValueError:  # 2026-02-30, month 13, year 0000
        raise InvalidInput("due is not a calendar date", code="invalid_due") from None


def validate_status(status: object) -> TaskStatus:
    if status not in STATUSES:
        raise InvalidInput("status must be 'open' or 'done'", code="invalid_status")
    return status


def validate_task_id(task_id: object) -> str:
    if not isinstance(task_id, str) or not is_session_id(task_id):
        raise InvalidTaskId("a task id is a lower-case UUID as the gateway issues it")
    return task_id


def validate_page_size(limit: object) -> int:
    if limit is None:
        return DEFAULT_PAGE
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {MAX_PAGE}", code="invalid_limit"
        )
    return limit
