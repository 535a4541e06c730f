"""Artifact bytes on disk: `data_dir/artifacts/<owner digest>/<id>`, owner-only.

Directories are 0700 and files 0600 whatever the umask: an artifact is as private as the
conversation that made it. The owner's directory is named by a digest of the user name,
not the name itself: a user name may be `.` or `..` (the name rule allows dots), and on a
case-insensitive filesystem `Alice` and `alice` would share one directory.

A file is written under a temporary name, synced, then renamed into place, so a reader
(or a crash) never sees half an artifact.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import BinaryIO

from sessiongate.store.private_files import OWNER_ONLY_DIRECTORY, OWNER_ONLY_FILE


def owner_directory(owner: str) -> str:
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]


class ArtifactFiles:
    """Synchronous file operations; the service runs them off the event loop."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def file_name(self, owner: str, artifact_id: str) -> str:
        """Where an artifact's bytes go, relative to the root (what a row records)."""
        return f"{owner_directory(owner)}/{artifact_id}"

    def write(self, file_name: str, data: bytes) -> None:
        fd, temporary = self.begin(file_name)
        try:
            self.append(fd, data)
        except BaseException:
            self.abort(fd, temporary)
            raise
        self.commit(fd, temporary, file_name)

    def begin(self, file_name: str) -> tuple[int, Path]:
        """A new private temporary file beside where `file_name` goes: its descriptor and
        path, for `append`, then `commit` (or `abort`)."""
        target = self._path(file_name)
        self._private_directory(self.root)
        self._private_directory(target.parent)
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY_FILE)
        try:
            os.fchmod(fd, OWNER_ONLY_FILE)  # the umask filtered the mode os.open was given
        except BaseException:
            self.abort(fd, temporary)
            raise
        return fd, temporary

    @staticmethod
    def append(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def commit(self, fd: int, temporary: Path, file_name: str) -> None:
        """Sync the temporary file and rename it into place."""
        try:
            os.fsync(fd)
        except BaseException:
            self.abort(fd, temporary)
            raise
        os.close(fd)
        try:
            os.replace(temporary, self._path(file_name))
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    @staticmethod
    def abort(fd: int, temporary: Path) -> None:
        os.close(fd)
        temporary.unlink(missing_ok=True)

    def open(self, file_name: str) -> BinaryIO | None:
        """The file open for reading, or None when it is gone."""
        try:
            return self._path(file_name).open("rb")
        except FileNotFoundError:
            return None

    def read(self, file_name: str) -> bytes | None:
        """The bytes, or None when the file is gone (erased while the row was read)."""
        try:
            return self._path(file_name).read_bytes()
        except FileNotFoundError:
            return None

    def remove(self, file_name: str) -> None:
        # The owner's directory stays even when empty: removing it could race a save of
        # the same owner's on another key (between its mkdir and its open).
        self._path(file_name).unlink(missing_ok=True)

    def _path(self, file_name: str) -> Path:
        # Names come from our own rows, but a row is never trusted to leave the root.
        path = (self.root / file_name).resolve()
        if not path.is_relative_to(self.root.resolve()) or path == self.root.resolve():
            raise ValueError(f"artifact file name {file_name!r} leaves the artifact folder")
        return path

    @staticmethod
    def _private_directory(directory: Path) -> None:
        if not directory.exists():
            directory.mkdir(mode=OWNER_ONLY_DIRECTORY, parents=True, exist_ok=True)
            directory.chmod(OWNER_ONLY_DIRECTORY)  # mkdir's mode is filtered by the umask
