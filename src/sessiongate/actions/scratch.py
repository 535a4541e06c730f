"""Per-run scratch directories: the only place a script may write.

Each run gets `scratch_root/run-<gateway pid>-<random>`, mode 0700, holding the script,
owned by the uid the script runs as; it is removed when the run ends, whatever the script
left in it. The gateway pid in the name lets start-up remove the directories of a gateway
process that died mid-run without touching those of live workers sharing `data_dir`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from sessiongate.actions.errors import SandboxUnavailable

log = logging.getLogger("sessiongate.actions")

OWNER_ONLY_DIRECTORY = 0o700
#: The script file: readable by the script's uid whatever the umask, not writable (the
#: script may still replace it: the directory is its own).
SCRIPT_MODE = 0o444


def prepare_root(root: Path) -> None:
    """Create `root` owner-only if missing; remove leftovers of dead gateway processes."""
    try:
        if not root.exists():
            root.mkdir(mode=OWNER_ONLY_DIRECTORY, parents=True, exist_ok=True)
            root.chmod(OWNER_ONLY_DIRECTORY)  # mkdir's mode is filtered by the umask
        for entry in root.glob("run-*-*"):
            pid = entry.name.split("-")[1]
            if pid.isdigit() and not _alive(int(pid)):
                remove_tree(entry)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot prepare the scratch directory {root}: {exc}") from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, belongs to someone else
    return True


def new_scratch(root: Path, name: str, script: str, owner: tuple[int, int] | None) -> Path:
    """A fresh 0700 directory under `root` holding `script` as `name`; chowned to
    `owner` (uid, gid) when given (a root gateway's script runs as another uid)."""
    scratch = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=root))
    try:
        path = scratch / name
        # Lone surrogates (possible in a JSON string) cannot be stored as UTF-8.
        path.write_text(script, encoding="utf-8", errors="replace")
        path.chmod(SCRIPT_MODE)
        if owner is not None:
            os.chown(scratch, *owner)
    except BaseException:
        remove_tree(scratch)
        raise
    return scratch


def remove_tree(path: Path) -> None:
    """Remove a scratch directory and everything in it, never failing the caller: what
    cannot be removed is logged. Root removes anything; a non-root gateway owns every
    file there (its user namespace maps the script onto it) but may first have to give
    back to itself the directories the script locked (mode 0)."""
    for attempt in range(2):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if attempt == 0:
                _unlock(path)
                continue
            extra = {"path": str(path), "error": str(exc)}
            log.warning("sandbox scratch directory not removed", extra=extra)


def _unlock(top: Path) -> None:
    """Make every directory under `top` owner-accessible again, parents first, never
    through a symlink (the script is dead by now: nothing changes underneath)."""
    stack = [str(top)]
    while stack:
        directory = stack.pop()
        with contextlib.suppress(OSError):
            os.chmod(directory, OWNER_ONLY_DIRECTORY)
            with os.scandir(directory) as entries:
                stack += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
