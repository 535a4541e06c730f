"""A socket's `resume` frame: `{"type":"resume","turn_id":…,"after":n}` sends that turn's
frames with seq > n again (the same shapes and `event_id`s), live until the turn ends.

It serves a client whose socket dropped mid-turn: it opens a new one, authenticates and
resumes after the last `event_id` it saw. A turn this process holds (service/turn/journal.py)
continues from there; any other of this user's turns (the process restarted, another
worker ran it) is read from the store and restated whole (service/turn/recovery.py): its
frames carry `"replayed": true`, their `event_id`s are the replay's own and `after` is
ignored, so the client replaces what it drew for that turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sessiongate.api.ws.frames import FrameError
from sessiongate.api.ws.render import error_frame, event_id, render
from sessiongate.service.turn.journal import (
    MAX_SEQ,
    FollowedTurn,
    InvalidTurnId,
    TurnJournal,
    TurnNotFound,
    check_turn_id,
)

#: Resumed turns one socket follows at once; one more is refused (`too_many_resumes`).
MAX_RESUMES = 8


def is_resume(data: dict[str, Any]) -> bool:
    return data.get("type") == "resume"


def resume_request(data: dict[str, Any]) -> tuple[str, int]:
    """(turn_id, after) of a resume frame, or FrameError naming what is wrong."""
    try:
        turn_id = check_turn_id(data.get("turn_id"))
    except InvalidTurnId as exc:
        raise FrameError(exc.code, exc.message) from None
    after = data.get("after", 0)
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_SEQ:
        raise FrameError("invalid_request", "after must be a non-negative integer (an event's seq)")
    return turn_id, after


def open_resume(
    journal: TurnJournal | None, owner: str, data: dict[str, Any], frame_number: int
) -> tuple[str, AsyncIterator[dict[str, Any]]]:
    """The turn id and the frames a resume frame asks for, or FrameError (a bad frame, no
    such turn)."""
    turn_id, after = resume_request(data)
    try:
        if journal is None:
            raise TurnNotFound("this gateway keeps no turns to resume")
        turn = journal.find(turn_id, owner)
    except TurnNotFound as exc:
        if journal is None or journal.stored is None:
            raise FrameError(exc.code, exc.message) from None
        # The store is read in the resume's own task: the socket's reader never waits.
        return turn_id, stored_frames(journal, turn_id, owner, frame_number)
    return turn_id, resumed_frames(turn, after, frame_number)


async def stored_frames(
    journal: TurnJournal, turn_id: str, owner: str, frame_number: int
) -> AsyncIterator[dict[str, Any]]:
    """The turn read back from the store, each frame marked `replayed`; or the
    `turn_not_found` error frame."""
    try:
        turn = await journal.locate(turn_id, owner)
    except TurnNotFound as exc:
        yield error_frame(exc.code, exc.message, frame_number)
        return
    async for frame in resumed_frames(turn, 0, frame_number):
        frame["replayed"] = True
        yield frame


async def resumed_frames(
    turn: FollowedTurn, after: int, frame_number: int
) -> AsyncIterator[dict[str, Any]]:
    """The turn's frames after `after`, each with its `event_id`; `complete` and `error`
    name the resume frame that asked (`frame`), as a turn's name the frame that ran it."""
    async for seq, event in turn.follow(after):
        frame = render(event, turn.key)
        if frame is None:
            continue
        frame["event_id"] = event_id(turn.turn_id, seq)
        if frame["type"] in ("complete", "error"):
            frame["frame"] = frame_number
        yield frame
