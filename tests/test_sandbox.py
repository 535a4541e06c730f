"""The script sandbox (`actions = "sandbox"`) against hostile scripts.

Every test runs a real script under bubblewrap with small limits (wall 2 s, CPU 1 s) and
checks, from the host, that what the script tried did not happen: no connection reached
the gateway's port, the data directory is untouched, no process of the script outlives
the run, the gateway's memory and event loop are unaffected.
"""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import shutil
import stat
import subprocess
import textwrap
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sessiongate.actions import (
    ActionResult,
    SandboxBusy,
    SandboxUnavailable,
    ScriptRunner,
    build_sandbox,
)
from sessiongate.config.routing import SandboxConfig
from tests.support.sandbox_procs import gateway_port, processes_with

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/sandbox.sh)"
)

MAX_PROCESSES = 8
MAX_OUTPUT = 2000


def config(**overrides: Any) -> SandboxConfig:
    values: dict[str, Any] = {
        "cpu_seconds": 1,
        "wall_timeout": timedelta(seconds=2),
        "memory_mb": 256,
        "max_processes": MAX_PROCESSES,
        "max_open_files": 32,
        "max_file_mb": 1,
        "max_output_chars": MAX_OUTPUT,
        "max_concurrent": 2,
    }
    return SandboxConfig.model_validate(values | overrides)


@pytest.fixture
def scratch_root(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sandbox"


@pytest.fixture
async def sandbox(scratch_root: Path) -> AsyncIterator[ScriptRunner]:
    runner = build_sandbox(config(), scratch_root)
    try:
        yield runner
    finally:
        await runner.aclose()


@pytest.fixture
def make_sandbox(scratch_root: Path) -> Callable[..., ScriptRunner]:
    return lambda **overrides: build_sandbox(config(**overrides), scratch_root)


async def run(runner: ScriptRunner, source: str) -> ActionResult:
    return await runner.run(textwrap.dedent(source))


def entries(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def outcomes(result: ActionResult) -> dict[str, str]:
    """`label outcome` lines printed by a probing script."""
    assert result.exit_code == 0, result
    return dict(line.split(" ", 1) for line in result.stdout.splitlines())


# A script helper: run `attempt` (a lambda), print `label OK` or `label <error name>`.
TRY = """
def attempt(label, action):
    try:
        action()
        print(label, "OK")
    except BaseException as exc:
        print(label, type(exc).__name__)
"""


# --- 1. no network -----------------------------------------------------------------------


async def test_the_gateways_own_port_and_the_outside_world_are_unreachable(
    sandbox: ScriptRunner,
) -> None:
    async with gateway_port() as port:
        result = await run(
            sandbox,
            TRY
            + f"""
import socket
attempt("gateway", lambda: socket.create_connection(("127.0.0.1", {port.port}), timeout=1))
attempt("outside", lambda: socket.create_connection(("1.1.1.1", 53), timeout=1))
print("interfaces", ",".join(name for _, name in socket.if_nameindex()))
""",
        )
        await asyncio.sleep(0.1)  # a connection that got through would be accepted by now
        assert port.connections == []
    seen = outcomes(result)
    assert seen["gateway"] == "ConnectionRefusedError"  # its own, empty, loopback
    assert seen["outside"] == "OSError"  # ENETUNREACH: no route at all
    assert seen["interfaces"] == "lo"


# --- 2. read-only system, nothing private visible ---------------------------------------


async def test_the_system_is_read_only_and_the_gateways_files_are_invisible(
    sandbox: ScriptRunner, tmp_path: Path
) -> None:
    data_dir = tmp_path / "gateway-data"
    data_dir.mkdir()
    sentinel = data_dir / "sessiongate.db"
    sentinel.write_text("conversations")
    result = await run(
        sandbox,
        TRY
        + f"""
import os
def write(path):
    with open(path, "w") as f:
        f.write("x")
attempt("write_etc", lambda: write("/etc/sandbox-probe"))
attempt("write_usr", lambda: write("/usr/sandbox-probe"))
attempt("write_root_fs", lambda: write("/sandbox-probe"))
attempt("write_dev", lambda: write("/dev/sandbox-probe"))
attempt("write_data_dir", lambda: write({str(data_dir / "new")!r}))
attempt("read_sentinel", lambda: open({str(sentinel)!r}).read())
attempt("list_data_dir", lambda: os.listdir({str(data_dir)!r}))
attempt("read_shadow", lambda: open("/etc/shadow").read())
attempt("list_root_home", lambda: os.listdir("/root"))
attempt("list_home", lambda: os.listdir("/home"))
attempt("list_host_tmp", lambda: os.listdir("/tmp"))
attempt("list_scratch_root", lambda: os.listdir({str(tmp_path)!r}))
attempt("sentinel_via_init", lambda: open("/proc/1/root" + {str(sentinel)!r}).read())
attempt("data_dir_via_init", lambda: os.listdir("/proc/1/root" + {str(data_dir)!r}))
""",
    )
    seen = outcomes(result)
    assert set(seen) >= {"write_etc", "read_sentinel", "sentinel_via_init"}
    assert all(outcome != "OK" for outcome in seen.values()), seen
    assert sentinel.read_text() == "conversations"
    assert entries(data_dir) == ["sessiongate.db"]
    assert "sandbox-probe" not in entries(Path("/etc")) + entries(Path("/usr"))


async def test_the_script_runs_unprivileged(sandbox: ScriptRunner) -> None:
    result = await run(
        sandbox,
        TRY
        + """
import os
print("ids", os.getresuid(), os.getresgid(), os.getgroups())
print("caps", [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0])
attempt("setuid_root", lambda: os.setuid(0))
attempt("chmod_usr", lambda: os.chmod("/usr/bin", 0o777))
""",
    )
    seen = outcomes(result)
    assert seen["ids"] == "(65534, 65534, 65534) (65534, 65534, 65534) []"
    assert int(seen["caps"], 16) == 0
    assert seen["setuid_root"] in {"PermissionError", "OSError"}  # EPERM, or EINVAL: unmapped
    assert seen["chmod_usr"] != "OK"


# --- 3. processes ------------------------------------------------------------------------


async def test_the_process_limit_binds_a_forking_script(sandbox: ScriptRunner) -> None:
    """RLIMIT_NPROC holds: a script that forks sleepers until it cannot is refused at
    `max_processes` (itself included), not by the wall clock."""
    result = await run(
        sandbox,
        """
        import os, time
        forked = 0
        while forked < 1000:
            try:
                pid = os.fork()
            except OSError as exc:
                print("refused", forked, exc.errno)
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            forked += 1
        else:
            print("unlimited", forked)
        """,
    )
    assert result.exit_code == 0 and not result.killed, result
    word, forked, code = result.stdout.split()
    assert word == "refused" and int(code) == errno.EAGAIN
    assert 1 <= int(forked) <= MAX_PROCESSES - 1


async def test_a_fork_bomb_is_killed_with_every_process_it_made(
    sandbox: ScriptRunner,
) -> None:
    marker = f"forkbomb-{uuid.uuid4().hex}"
    started = time.monotonic()
    result = await run(
        sandbox,
        f"""
        import os, sys
        bomb = (
            "import os, time\\n"
            "while True:\\n"
            "    try:\\n"
            "        os.fork()\\n"
            "    except OSError:\\n"
            "        time.sleep(0.05)\\n"
        )
        os.execv(sys.executable, [sys.executable, "-c", bomb, {marker!r}])
        """,
    )
    assert result.killed and result.exit_code is None
    assert result.reason in {"wall_timeout", "cpu_limit"}
    assert time.monotonic() - started < 5
    assert processes_with(marker) == []  # no stray process once run() returns


async def test_a_daemonised_child_dies_with_the_script(sandbox: ScriptRunner) -> None:
    marker = f"daemon-{uuid.uuid4().hex}"
    result = await run(
        sandbox,
        f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                sleep = "import time; time.sleep(60)"
                os.execv(sys.executable, [sys.executable, "-c", sleep, {marker!r}])
            os._exit(0)
        os.wait()
        print("parent done")
        """,
    )
    assert result.exit_code == 0 and result.stdout == "parent done\n"
    assert processes_with(marker) == []


# --- 4. memory ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hog",
    [
        "block = bytearray(4 * 1024**3)",
        "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024**2))",
    ],
    ids=["4GB-at-once", "16MB-at-a-time"],
)
async def test_a_memory_hog_gets_a_memory_error(sandbox: ScriptRunner, hog: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await run(sandbox, hog)
    assert result.exit_code == 1 and not result.killed
    assert result.reason == "memory_limit"
    assert result.stderr.rstrip().endswith("MemoryError")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50 * 1024  # the gateway's own peak memory did not follow


# --- 5. time -----------------------------------------------------------------------------


async def test_a_busy_loop_is_killed_at_the_cpu_limit(
    make_sandbox: Callable[..., ScriptRunner],
) -> None:
    # A wall clock far enough not to come first on a loaded machine.
    runner = make_sandbox(wall_timeout=timedelta(seconds=8))
    result = await run(runner, "while True:\n    pass")
    await runner.aclose()
    assert result.killed and result.exit_code is None
    assert result.reason == "cpu_limit"
    assert 900 <= result.duration_ms < 8000


async def test_an_idle_endless_script_is_killed_at_the_wall_timeout(
    sandbox: ScriptRunner,
) -> None:
    result = await run(
        sandbox,
        """
        import time
        print("started", flush=True)
        while True:
            time.sleep(0.1)
        """,
    )
    assert result.killed and result.exit_code is None
    assert result.reason == "wall_timeout"
    assert 2000 <= result.duration_ms < 3500
    assert result.stdout == "started\n"  # what it wrote before is kept


# --- 6. output ---------------------------------------------------------------------------


async def test_a_100mb_print_is_cut_without_the_gateway_holding_it(
    sandbox: ScriptRunner,
) -> None:
    tracemalloc.start()
    try:
        started = time.monotonic()
        result = await run(
            sandbox,
            """
            import sys
            chunk = "x" * 1_000_000
            for _ in range(100):
                sys.stdout.write(chunk)
            """,
        )
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.stdout) <= MAX_OUTPUT
    assert result.stdout.startswith("x" * 1000)
    assert "[output cut:" in result.stdout
    assert result.killed and result.reason == "output_limit"
    assert elapsed < 5
    assert peak < 8 * 1024 * 1024  # nowhere near the 100 MB written


async def test_output_over_the_limit_is_cut_but_the_script_finishes(
    sandbox: ScriptRunner,
) -> None:
    result = await run(
        sandbox,
        """
        import sys
        print("é" * 3000)
        print("oops", file=sys.stderr)
        raise SystemExit(4)
        """,
    )
    assert result.exit_code == 4 and not result.killed and result.reason is None
    assert len(result.stdout) == MAX_OUTPUT
    assert result.stdout.startswith("é" * 1000)
    assert result.stdout.endswith("[output cut: 6001 bytes written]")
    assert result.stderr == "oops\n"


# --- 7. terminal -------------------------------------------------------------------------


async def test_tiocsti_cannot_push_input_into_any_terminal(sandbox: ScriptRunner) -> None:
    result = await run(
        sandbox,
        TRY
        + """
import fcntl, os, termios
def push(fd):
    fcntl.ioctl(fd, termios.TIOCSTI, b"x")
def push_tty():
    fd = os.open("/dev/tty", os.O_RDWR)
    push(fd)
attempt("dev_tty", push_tty)
for fd in (0, 1, 2):
    attempt(f"fd{fd}", lambda: push(fd))
attempt("ctty_pgrp", lambda: os.tcgetpgrp(0))
""",
    )
    seen = outcomes(result)
    assert set(seen) == {"dev_tty", "fd0", "fd1", "fd2", "ctty_pgrp"}
    assert all(outcome != "OK" for outcome in seen.values()), seen


# --- 8. environment, scratch, results ----------------------------------------------------


async def test_the_environment_is_scrubbed(
    sandbox: ScriptRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSIONGATE_TEST_API_KEY", "sk-very-secret")
    assert os.environ["SESSIONGATE_TEST_API_KEY"] == "sk-very-secret"
    result = await run(sandbox, "import os\nfor k, v in sorted(os.environ.items()): print(k, v)")
    assert "sk-very-secret" not in result.stdout
    assert dict(line.split(" ", 1) for line in result.stdout.splitlines()) == {
        "HOME": "/work",
        "LANG": "C.UTF-8",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PWD": "/work",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


async def test_the_scratch_directory_is_writable_and_removed_afterwards(
    sandbox: ScriptRunner, scratch_root: Path
) -> None:
    result = await run(
        sandbox,
        """
        import os, stat
        os.makedirs("sub/deeper")
        with open("sub/deeper/out.txt", "w") as f:
            f.write("data")
        os.symlink("/etc", "link-to-etc")
        os.chmod("sub", 0)  # locked: the clean-up must still get through
        print(os.getcwd(), os.path.expanduser("~"), sorted(os.listdir(".")))
        print(oct(stat.S_IMODE(os.stat("/work").st_mode)))
        """,
    )
    assert result.exit_code == 0, result
    assert result.stdout.splitlines() == [
        "/work /work ['link-to-etc', 'script.py', 'sub']",
        "0o700",
    ]
    assert entries(scratch_root) == []  # nothing left, the script's files neither
    assert "ld.so.cache" in entries(Path("/etc"))  # the symlink was removed, not followed


@pytest.mark.parametrize(
    ("source", "exit_code", "killed", "reason", "stderr_end"),
    [
        ("print('fine')", 0, False, None, ""),
        ("raise SystemExit(3)", 3, False, None, ""),
        ("1 / 0", 1, False, None, "ZeroDivisionError: division by zero"),
        ("raise SystemExit(137)", 137, False, None, ""),  # an exit status, not SIGKILL
        ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", None, True, "signal:15", ""),
    ],
)
async def test_exit_codes_and_stderr_are_reported(
    sandbox: ScriptRunner,
    source: str,
    exit_code: int | None,
    killed: bool,
    reason: str | None,
    stderr_end: str,
) -> None:
    result = await sandbox.run(source)
    assert (result.exit_code, result.killed, result.reason) == (exit_code, killed, reason)
    assert result.stderr.rstrip().endswith(stderr_end)
    assert result.to_dict() == {
        "exit_code": exit_code,
        "stdout": "fine\n" if source == "print('fine')" else "",
        "stderr": result.stderr,
        "duration_ms": result.duration_ms,
        "killed": killed,
        "reason": reason,
    }
    if stderr_end:
        assert 'File "/work/script.py", line 1' in result.stderr


async def test_file_size_and_open_file_limits(sandbox: ScriptRunner) -> None:
    result = await run(
        sandbox,
        """
        import os
        try:
            with open("big", "wb") as f:
                f.write(b"x" * (2 * 1024 * 1024))
        except OSError as exc:
            print("write", exc.errno)
        files = []
        try:
            while len(files) < 1000:
                files.append(open("/dev/null"))
        except OSError as exc:
            print("open", exc.errno, len(files))
        """,
    )
    lines = result.stdout.split("\n")
    assert lines[0] == f"write {errno.EFBIG}"
    word, code, opened = lines[1].split()
    assert (word, int(code)) == ("open", errno.EMFILE) and int(opened) < 32


# --- 9. the gateway stays responsive; concurrency ----------------------------------------


async def test_the_event_loop_keeps_running_beside_a_hostile_script(
    sandbox: ScriptRunner,
) -> None:
    gaps: list[float] = []

    async def heartbeat() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    beating = asyncio.create_task(heartbeat())
    try:
        # Four processes spinning on two cores, printing all the while, until killed.
        result = await run(
            sandbox,
            """
            import os, time
            for _ in range(3):
                if os.fork() == 0:
                    break
            last = time.monotonic()
            while True:
                if time.monotonic() - last > 0.01:
                    print("tick", flush=True)
                    last = time.monotonic()
            """,
        )
    finally:
        beating.cancel()
    assert result.killed and result.duration_ms >= 1000
    assert len(gaps) >= 30
    assert max(gaps) < 0.3, max(gaps)


async def test_one_script_more_than_max_concurrent_is_refused_at_once(
    make_sandbox: Callable[..., ScriptRunner],
) -> None:
    runner = make_sandbox(max_concurrent=2, wall_timeout=timedelta(seconds=10))
    sleeper = "import time\ntime.sleep(30)"
    running = [asyncio.create_task(runner.run(sleeper)) for _ in range(2)]
    await asyncio.sleep(0.2)
    started = time.monotonic()
    with pytest.raises(SandboxBusy) as busy:
        await runner.run("print('one too many')")
    assert time.monotonic() - started < 0.1
    assert busy.value.code == "sandbox_busy" and busy.value.status == 503
    await runner.aclose()  # kills both sleepers
    results = await asyncio.wait_for(asyncio.gather(*running), 5)
    assert [(r.killed, r.reason) for r in results] == [(True, "closed"), (True, "closed")]
    with pytest.raises(SandboxUnavailable):
        await runner.run("print('after close')")


async def test_a_cancelled_run_leaves_nothing_behind(
    sandbox: ScriptRunner, scratch_root: Path
) -> None:
    marker = f"cancelled-{uuid.uuid4().hex}"
    sleep = "import time; time.sleep(60)"
    script = (
        f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', {sleep!r}, {marker!r}])"
    )
    task = asyncio.create_task(sandbox.run(script))
    await asyncio.sleep(0.3)
    assert processes_with(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert processes_with(marker) == []  # at once: the run waited for the sandbox to go
    assert entries(scratch_root) == []
    assert (await sandbox.run("print('still fine')")).stdout == "still fine\n"


# --- 10. no sandbox, no scripts ----------------------------------------------------------


def test_no_bwrap_on_path_means_no_sandbox(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scratch_root: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxUnavailable) as missing:
        build_sandbox(config(), scratch_root)
    assert missing.value.code == "sandbox_unavailable" and missing.value.status == 503
    assert "bwrap" in missing.value.message and "bubblewrap" in missing.value.message


@pytest.mark.parametrize(
    "python", ["python-that-does-not-exist", "/nonexistent/bin/python3", "relative/python3"]
)
def test_a_missing_interpreter_means_no_sandbox(scratch_root: Path, python: str) -> None:
    with pytest.raises(SandboxUnavailable) as missing:
        build_sandbox(config(python=python), scratch_root)
    assert python in missing.value.message


def test_the_scratch_root_is_private_and_a_dead_gateways_leftovers_go(scratch_root: Path) -> None:
    build_sandbox(config(), scratch_root)
    assert stat.S_IMODE(scratch_root.stat().st_mode) == 0o700
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead, alive = f"run-{finished.pid}-a1b2c3", f"run-{os.getpid()}-d4e5f6"
    for name in (dead, alive):
        (scratch_root / name).mkdir()
        (scratch_root / name / "script.py").write_text("print('left over')")
    build_sandbox(config(), scratch_root)
    assert entries(scratch_root) == [alive]  # a live worker's run is not touched
