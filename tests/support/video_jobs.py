"""A local video job API on loopback, in OpenAI's `/v1/videos` shape: `POST /v1/videos`
submits a job, `GET /v1/videos/{id}` polls it (pending for a few polls, then done),
`GET /v1/videos/{id}/content` returns the video's bytes.

The prompt picks how a job behaves, so one server plays every case:
- anything else: `queued`, then `in_progress`, then `completed` after `polls` polls;
- containing "explode": the job ends `failed`;
- containing "forever": the job stays `in_progress`;
- containing "not a video": the content is HTML, not a video;
- containing "reject": the submit answers HTTP 500 (with text that must never show).
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def tiny_mp4() -> bytes:
    """The start of a real MP4: an `ftyp` box (isom) and an empty `mdat`."""
    ftyp = b"isom" + struct.pack(">I", 512) + b"isomiso2avc1mp41"
    return (
        struct.pack(">I", 8 + len(ftyp))
        + b"ftyp"
        + ftyp
        + struct.pack(">I", 8 + 64)
        + b"mdat"
        + bytes(64)
    )


MP4 = tiny_mp4()


@dataclass
class Job:
    prompt: str
    polls: int = 0


@dataclass
class VideoJobs:
    url: str = ""
    #: Polls a job answers `in_progress` before it is `completed`.
    polls: int = 2
    jobs: dict[str, Job] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    authorization: list[str | None] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [f"{method} {path}" for method, path, _ in self.requests]


def _handler(state: VideoJobs) -> type[BaseHTTPRequestHandler]:
    counter = itertools.count(1)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _json(self, status: int, body: Any) -> None:
            self._send(status, json.dumps(body).encode(), "application/json")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with lock:
                state.requests.append(("POST", self.path, body))
                state.authorization.append(self.headers.get("Authorization"))
            if self.path != "/v1/videos":
                self._json(404, {"error": {"message": "no such path"}})
                return
            prompt = str(body.get("prompt", ""))
            if "reject" in prompt:
                self._json(500, {"error": {"message": "SECRET upstream text"}})
                return
            job_id = f"video_{next(counter)}"
            with lock:
                state.jobs[job_id] = Job(prompt)
            self._json(200, {"id": job_id, "object": "video", "status": "queued"})

        def do_GET(self) -> None:
            with lock:
                state.requests.append(("GET", self.path, None))
            parts = self.path.strip("/").split("/")
            if len(parts) < 3 or parts[:2] != ["v1", "videos"]:
                self._json(404, {"error": {"message": "no such path"}})
                return
            job = state.jobs.get(parts[2])
            if job is None:
                self._json(404, {"error": {"message": "no such job"}})
                return
            if len(parts) == 4 and parts[3] == "content":
                if "not a video" in job.prompt:
                    self._send(200, b"<html>SECRET</html>", "text/html")
                else:
                    self._send(200, MP4, "video/mp4")
                return
            job.polls += 1
            if "explode" in job.prompt:
                status = "failed"
            elif "forever" in job.prompt or job.polls <= state.polls:
                status = "in_progress"
            else:
                status = "completed"
            body: dict[str, Any] = {"id": parts[2], "object": "video", "status": status}
            if status == "failed":
                body["error"] = {"message": "SECRET upstream text"}
            self._json(200, body)

    return Handler


@contextmanager
def video_jobs(polls: int = 2) -> Iterator[VideoJobs]:
    state = VideoJobs(polls=polls)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
