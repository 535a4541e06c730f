"""Seed 004's warning sound as an artifact of the key a refused request came in on, so
its desktop client fetches and plays it like any spoken reply (`GET /ai` answers its URL
on `---UNSAFE---`).

The sound is the same every time (speech/tone.py), so each key keeps one copy: the
artifact made for a key is reused while it exists (erasing the key erases it, and the
next refusal makes a new one). Which artifact a key has is remembered in this process
(a bounded map; a restart or another worker makes one more, which is harmless).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from sessiongate.core.artifacts import Artifact
from sessiongate.service.artifacts import ArtifactNotFound, ArtifactService
from sessiongate.speech.base import WAV_MEDIA_TYPE
from sessiongate.speech.tone import warning_sound

#: Keys whose warning artifact is remembered; the oldest is forgotten past it.
MAX_REMEMBERED = 4096


class WarningSounds:
    def __init__(self, artifacts: ArtifactService | None) -> None:
        self.artifacts = artifacts
        sound = warning_sound()
        self.wav = sound.to_wav()
        self.duration_ms = sound.duration_ms
        self._known: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = asyncio.Lock()

    async def for_key(self, owner: str, key: str) -> Artifact | None:
        """The warning artifact of `owner`'s `key`, made when it has none; None when this
        gateway keeps no artifacts."""
        artifacts = self.artifacts
        if artifacts is None:
            return None
        async with self._lock:  # two refusals at once on one key make one artifact
            known = self._known.get((owner, key))
            if known is not None:
                try:
                    found = await artifacts.describe(owner, known)
                except ArtifactNotFound:
                    del self._known[(owner, key)]
                else:
                    self._known.move_to_end((owner, key))
                    return found
            made = await artifacts.save(owner, self.wav, WAV_MEDIA_TYPE, key=key)
            self._known[(owner, key)] = made.artifact_id
            while len(self._known) > MAX_REMEMBERED:
                self._known.popitem(last=False)
            return made
