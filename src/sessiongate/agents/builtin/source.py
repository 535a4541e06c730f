"""The built-in tools that reach the web (`weather_current`, `image_generate`,
`video_generate`) as one tool source, registered beside the others (MCP servers, agents,
notes and tasks).

Named "builtin-web" so it stays apart from the source of the notes and tasks tools; each
of its tools still reports its `source` as "builtin".
"""

from __future__ import annotations

from sessiongate.agents.builtin.images import image_tool
from sessiongate.agents.builtin.video import video_tool
from sessiongate.agents.builtin.weather import weather_tool
from sessiongate.agents.tools import StaticToolSource, Tool
from sessiongate.config import Settings
from sessiongate.service.artifacts import ArtifactService

SOURCE_NAME = "builtin-web"


def builtin_tool_source(settings: Settings, artifacts: ArtifactService) -> StaticToolSource:
    """`weather_current` always (an agent still offers only what it lists);
    `image_generate` when `[tools.images] model` is set; `video_generate` when
    `[tools.video] base_url` is set."""
    tools: list[Tool] = [weather_tool(settings.tools.weather)]
    images = image_tool(settings, artifacts)
    if images is not None:
        tools.append(images)
    video = video_tool(settings, artifacts)
    if video is not None:
        tools.append(video)
    return StaticToolSource(SOURCE_NAME, tools)
