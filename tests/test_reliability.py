"""The gateway process killed with SIGKILL mid-answer, then restarted."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def gateway_process(db: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.serve_slow", str(db), "alice"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "no output"
        info = json.loads(line)
        url = f"http://127.0.0.1:{info['port']}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield proc, url, info["key"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_sigkill_mid_stream_then_restart(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    key = "crash:test"
    with gateway_process(db) as (proc, url, api_key):
        headers = {"Authorization": f"Bearer {api_key}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
            fast = client.post(
                f"/v1/sessions/{key}/messages",
                json={"content": "warm up", "stream": False},
                timeout=30,
            )
            assert fast.status_code == 200
            with client.stream(
                "POST",
                f"/v1/sessions/{key}/messages",
                json={"content": "answer slowly: the message that must survive"},
            ) as response:
                tokens = 0
                for line in response.iter_lines():
                    if line == "event: token":
                        tokens += 1
                    if tokens == 3:
                        os.kill(proc.pid, signal.SIGKILL)
                        break
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL

    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
    rows = raw.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    raw.close()
    assert rows[-1] == ("user", "answer slowly: the message that must survive")
    assert [r[0] for r in rows] == ["user", "assistant", "user"]

    with gateway_process(db) as (_, url, api_key):
        headers = {"Authorization": f"Bearer {api_key}"}
        reply = httpx.post(
            f"{url}/v1/sessions/{key}/messages",
            json={"content": "are you back?", "stream": False},
            headers=headers,
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["message_count"] == 5
        shown = httpx.get(f"{url}/v1/sessions/{key}", headers=headers, timeout=10).json()
        assert shown["latest"]["message_count"] == 5
