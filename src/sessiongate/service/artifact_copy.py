"""The WebDAV copy of every artifact (`[artifacts] webdav_url`, DESIGN.md §9): made in the
background after `ArtifactService.save` returns, retried with backoff, persisted so a
restart goes on, reported to the artifact's owner and logged.

- `save` writes the artifact's row and its copy's row (`pending`, with the remote path the
  layout gives) in one transaction, then wakes the sender; the turn never waits for the
  network.
- One sender task per gateway process claims the oldest due row (a lease, so several
  processes on one PostgreSQL database never take the same row), uploads the file (MKCOL
  for the folders it needs, then PUT) and records the outcome: `copied`; or a retry at
  `retry_backoff`, doubling after each failed try up to an hour; or `failed` after
  `max_attempts` or at once when no retry can help (refused credentials, a 4xx). One copy
  at a time: artifacts are few and the WebDAV server is one.
- Erasing an artifact (its key, or its user) turns its row into `deleting` in the same
  transaction (`delete_remote`, on by default), and the sender deletes the remote file with
  the same retries; a deletion still failing after `max_attempts` is logged as an error
  and dropped (the one case where a copy can outlive its artifact).
- Each start gives `failed` copies one more round of attempts (after fixing the
  credentials, a restart copies what was refused); a stop gives an attempt cut short back
  uncounted, so the next start makes it again.

`{owner}` and `{key}` of the layout are digests unless `hash_names = false`: the WebDAV
server (often another machine, another administrator, a sync client on a phone) need not
learn who talks to the gateway about what. They are unsalted SHA-256 prefixes, the owner's
the same as its folder under data_dir/artifacts, so they hide names from sight, not from
someone who guesses a name and hashes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import time
from datetime import UTC, timedelta

from sessiongate.config.artifacts import ArtifactsConfig
from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.core.clock import Clock
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ConfigError
from sessiongate.store.artifact_bytes import ArtifactBytes
from sessiongate.store.artifact_copies import ArtifactCopyStore, CopyJob
from sessiongate.store.artifact_files import owner_directory
from sessiongate.store.webdav import WebDavError, WebDavFolder

log = logging.getLogger(__name__)

#: The longest wait between two retries of one copy.
MAX_BACKOFF = timedelta(hours=1)
#: The longest the sender sleeps without looking at the queue: rows another process
#: queued, and leases that ran out, are found within this.
POLL_SECONDS = 30.0
#: The folder of artifacts no conversation made (`{key}` when there is no key).
NO_KEY = "unkeyed"

#: A copy's file extension by media type; anything else is `.bin`.
EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "audio/opus": "opus",
    "audio/flac": "flac",
    "video/mp4": "mp4",
    "video/webm": "webm",
    "application/pdf": "pdf",
    "text/plain": "txt",
}

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._@-]")


def extension(media_type: str) -> str:
    return EXTENSIONS.get(media_type, "bin")


def _plain(name: str) -> str:
    """A user or key name as a folder name: `:` (and anything else a Windows sync client
    refuses) as `_`; `.` and `..` prefixed so they stay names."""
    safe = _UNSAFE_NAME.sub("_", name)
    return "_" + safe if set(safe) == {"."} else safe


def key_digest(owner: str, key: str) -> str:
    """A key's folder when names are hashed: of `owner/key`, so two users' keys of one name
    do not share a digest."""
    return hashlib.sha256(KeyRef(owner, key).storage_id.encode("utf-8")).hexdigest()[:32]


def remote_path(config: ArtifactsConfig, artifact: Artifact) -> str:
    """Where the artifact's copy goes under `webdav_url` (names not percent-encoded)."""
    if config.hash_names:
        owner = owner_directory(artifact.owner)
        key = NO_KEY if artifact.key is None else key_digest(artifact.owner, artifact.key)
    else:
        owner = _plain(artifact.owner)
        key = NO_KEY if artifact.key is None else _plain(artifact.key)
    return config.layout.format(
        owner=owner,
        key=key,
        artifact_id=artifact.artifact_id,
        ext=extension(artifact.media_type),
        date=artifact.created_at.astimezone(UTC).date().isoformat(),
    )


def webdav_credentials(config: ArtifactsConfig) -> tuple[str, str] | None:
    """The user name and password from the environment, read once at start-up; None for a
    server without authentication. A missing variable is a ConfigError naming it."""
    if not config.username_env:
        return None
    values: list[str] = []
    for field in ("username_env", "password_env"):
        variable = getattr(config, field)
        value = os.environ.get(variable, "")
        if not value:
            raise ConfigError(
                f"artifacts.{field}: environment variable {variable} is not set"
                " (artifacts.webdav_url is set, and its credentials come from there)"
            )
        values.append(value)
    return values[0], values[1]


def retry_delay(attempts: int, backoff: timedelta) -> timedelta:
    """The wait after `attempts` failed tries: backoff, doubling, at most MAX_BACKOFF."""
    factor: int = 2 ** min(max(attempts - 1, 0), 30)
    return min(backoff * factor, MAX_BACKOFF)


class ArtifactCopier:
    """The copy queue's sender, and what `ArtifactService` asks of it. Built for every
    gateway; without `webdav_url` it plans no copies and sends nothing (rows left from
    a time with copies wait)."""

    def __init__(
        self,
        config: ArtifactsConfig,
        rows: ArtifactCopyStore,
        files: ArtifactBytes,
        clock: Clock,
    ) -> None:
        self.config = config
        self.rows = rows
        self.files = files
        self.clock = clock
        self.enabled = config.webdav_url is not None
        self._auth = webdav_credentials(config) if self.enabled else None
        timeout = config.timeout.total_seconds()
        folders = config.layout.count("/") + 1  # with the base folder
        #: One whole copy: every MKCOL twice (a folder may vanish once) and two PUTs.
        self.job_seconds = timeout * (2 * folders + 2)
        self._lease = timedelta(seconds=self.job_seconds * 2)
        self._folder: WebDavFolder | None = None
        self._sender: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None

    def plan(self, artifact: Artifact) -> ArtifactCopy | None:
        """The pending copy row to write with a new artifact; None when copies are off."""
        if not self.enabled:
            return None
        now = self.clock.now()
        return ArtifactCopy(
            artifact_id=artifact.artifact_id,
            owner=artifact.owner,
            remote_path=remote_path(self.config, artifact),
            state="pending",
            attempts=0,
            next_attempt_at=now,
            last_error=None,
            updated_at=now,
        )

    def wake(self) -> None:
        """Something was queued: look now rather than at the next poll."""
        if self._wake is not None:
            self._wake.set()

    async def status(self, owner: str, artifact_id: str) -> ArtifactCopy | None:
        return await self.rows.get_copy(owner, artifact_id)

    @property
    def running(self) -> bool:
        return self._sender is not None and not self._sender.done()

    async def start(self) -> None:
        """Start sending (idempotent; nothing without `webdav_url`). The store must be
        started."""
        if not self.enabled or self.running:
            return
        assert self.config.webdav_url is not None
        retried = await self.rows.retry_failed(self.clock.now())
        if retried:
            log.info("artifact copies: %d failed copies get another round of attempts", retried)
        self._folder = WebDavFolder(
            self.config.webdav_url, self._auth, timeout=self.config.timeout.total_seconds()
        )
        self._wake = asyncio.Event()
        self._sender = asyncio.get_running_loop().create_task(
            self._run(), name="sessiongate-artifact-copies"
        )

    async def stop(self) -> None:
        """Stop sending; an attempt cut short is given back. Idempotent."""
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
        folder, self._folder = self._folder, None
        if folder is not None:
            await folder.aclose()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            self._wake.clear()  # before looking: a wake from now on is not lost
            wait = POLL_SECONDS
            try:
                now = self.clock.now()
                job = await self.rows.claim_due(now, now + self._lease)
                if job is not None:
                    await self._handle(job)
                    continue
                due = await self.rows.next_due()
                if due is not None:
                    wait = min(max((due - self.clock.now()).total_seconds(), 0.01), POLL_SECONDS)
            except Exception:  # the database is away: look again at the next poll
                log.exception("artifact copies: could not read the queue")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _handle(self, job: CopyJob) -> None:
        started = time.monotonic()
        try:
            error = await self._attempt(job)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):  # else the lease ends by itself
                await self.rows.release(job.copy, self.clock.now())
            raise
        except Exception:  # a bug, or the local file unreadable: counted, retried
            log.exception("artifact copies: the attempt on %s crashed", job.copy.artifact_id)
            error = WebDavError("the copy failed inside the gateway (see its log)", retry=True)
        try:
            if not await self._record(job.copy, error, time.monotonic() - started):
                # Erased while this attempt ran: its deletion may go now.
                await self.rows.end_lease(job.copy, self.clock.now())
        except Exception:
            log.exception("artifact copies: could not record %s", job.copy.artifact_id)

    async def _attempt(self, job: CopyJob) -> WebDavError | None:
        """One upload or deletion; the error, or None for done."""
        folder = self._folder
        assert folder is not None
        copy = job.copy
        try:
            async with asyncio.timeout(self.job_seconds):
                if copy.state == "deleting":
                    await folder.delete(copy.remote_path)
                    return None
                data = None
                if job.file_name is not None:
                    data = await self.files.read(job.file_name)
                if data is None:
                    return WebDavError(
                        "the artifact's file is gone from the gateway: nothing to copy",
                        retry=False,
                    )
                await folder.put(
                    copy.remote_path, data, job.media_type or "application/octet-stream"
                )
                return None
        except TimeoutError:
            return WebDavError(f"the copy did not finish within {self.job_seconds:g} s", retry=True)
        except WebDavError as exc:
            return exc

    async def _record(self, copy: ArtifactCopy, error: WebDavError | None, took: float) -> bool:
        """Write the attempt's outcome and log it; False when the row changed meanwhile
        (then nothing is written)."""
        now = self.clock.now()
        what = "deletion of the copy" if copy.state == "deleting" else "copy"
        if error is None:
            if copy.state == "deleting":
                if not await self.rows.forget(copy):
                    return False
                log.info("artifact %s: its WebDAV copy was deleted", copy.artifact_id)
                return True
            if not await self.rows.settle(copy, "copied", now=now):
                return False
            log.info(
                "artifact %s copied to WebDAV (attempt %d, %.0f ms)",
                copy.artifact_id,
                copy.attempts,
                took * 1000,
            )
            return True
        if error.retry and copy.attempts < self.config.max_attempts:
            wait = retry_delay(copy.attempts, self.config.retry_backoff)
            if not await self.rows.settle(
                copy, copy.state, now=now, next_attempt_at=now + wait, last_error=error.message
            ):
                return False
            log.warning(
                "artifact %s: %s attempt %d of %d failed (%s); next in %.1f s",
                copy.artifact_id,
                what,
                copy.attempts,
                self.config.max_attempts,
                error.message,
                wait.total_seconds(),
            )
            return True
        if copy.state == "deleting":
            # Nothing more can be done here: the file stays on the server. Say where.
            if not await self.rows.forget(copy):
                return False
            log.error(
                "artifact %s: its WebDAV copy could not be deleted after %d attempts (%s);"
                " it is left at %s",
                copy.artifact_id,
                copy.attempts,
                error.message,
                copy.remote_path,
            )
            return True
        if not await self.rows.settle(copy, "failed", now=now, last_error=error.message):
            return False
        log.error(
            "artifact %s: copy failed after %d attempts (%s)",
            copy.artifact_id,
            copy.attempts,
            error.message,
        )
        return True
