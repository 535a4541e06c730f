"""A gateway process for the crash tests: a slow model, a known user, a printed port.

Usage: python -m tests.support.serve_slow DB_PATH USER
Prints one JSON line {"port", "key"} on stdout once it is listening.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import uvicorn

from sessiongate.api.app import create_app
from sessiongate.config import Settings
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    TextDelta,
    Usage,
    WireMessage,
)
from sessiongate.service.engine import Engine, build_engine


class SlowModel:
    """Answers a message containing "slowly" with a long, slow stream (so a test can kill
    the process mid-answer), and anything else at once."""

    name = "slow"

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        slow = "slowly" in messages[-1].get("content", "")
        count = 200 if slow else 5
        for index in range(count):
            yield TextDelta(f"word{index} ")
            if slow:
                await asyncio.sleep(0.05)
        yield Usage(1, count)


async def prepare(db_path: Path, user: str) -> tuple[Engine, str]:
    settings = Settings(
        data_dir=db_path.parent,
        database={"url": f"sqlite:///{db_path}"},
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": "slow"}},
    )
    engine = build_engine(settings, models={"slow": SlowModel()})
    if await engine.users.users.get_user(user) is None:
        _, key = await engine.users.add(user)
    else:
        key = await engine.users.new_key(user)
    return engine, key


def main() -> None:
    db_path, user = Path(sys.argv[1]), sys.argv[2]
    engine, key = asyncio.run(prepare(db_path, user))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(json.dumps({"port": port, "key": key}), flush=True)
    config = uvicorn.Config(create_app(engine), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
