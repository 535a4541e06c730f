"""`weather_current`: the weather now at a place, from an Open-Meteo-shaped API.

A place name is geocoded first (`GET {geocoding_url}/v1/search?name=…&count=1`, answered
`{"results": [{name, latitude, longitude, country, admin1, timezone, …}]}`, with no
`results` at all when nothing matched); then
`GET {base_url}/v1/forecast?latitude=…&longitude=…&current=…` answers
`{"current": {time, temperature_2m, …}, "current_units": {temperature_2m: "°C", …}}`.

Upstream failures reach the model as short fixed sentences: never the upstream body
(it is not ours to pass on, and it could carry text written to steer the model). Each
request is bounded by `[tools.weather] timeout` as a whole, not only per read, so a server
that trickles bytes cannot hold a turn. Bodies are read up to a cap for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, TypeGuard

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from sessiongate.agents.builtin.arguments import parse_arguments, schema_of
from sessiongate.agents.tools import FunctionTool, ToolContext, ToolFailed, ToolOutput
from sessiongate.config.tools import WeatherToolConfig
from sessiongate.models.base import ToolSpec

NAME = "weather_current"
CURRENT = "temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code"
#: Geocoding and forecast answers are a few kilobytes; anything far larger is not one.
MAX_BODY_BYTES = 1_048_576

#: WMO weather interpretation codes, as Open-Meteo documents them.
CONDITIONS = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}


class WeatherArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    location: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="A place name, e.g. 'Berlin' or 'Lyon'. Give this or latitude and longitude.",
    )
    latitude: float | None = Field(None, ge=-90, le=90, description="Degrees north.")
    longitude: float | None = Field(None, ge=-180, le=180, description="Degrees east.")

    @model_validator(mode="after")
    def _one_way_to_name_a_place(self) -> WeatherArguments:
        has_location = self.location is not None and bool(self.location.strip())
        has_latitude, has_longitude = self.latitude is not None, self.longitude is not None
        if has_latitude != has_longitude:
            raise ValueError("give latitude and longitude together")
        if has_location == has_latitude:
            raise ValueError("give either location or latitude and longitude")
        return self


class WeatherTool:
    """The tool's behaviour; `weather_tool` wraps it for the registry."""

    def __init__(self, config: WeatherToolConfig) -> None:
        self.config = config
        self.seconds = config.timeout.total_seconds()

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(WeatherArguments, arguments)
        async with httpx.AsyncClient(timeout=self.seconds, follow_redirects=False) as client:
            place: dict[str, Any] = {}
            if wanted.latitude is not None and wanted.longitude is not None:
                latitude, longitude = wanted.latitude, wanted.longitude
            else:
                place = await self._geocode(client, (wanted.location or "").strip())
                latitude, longitude = place["latitude"], place["longitude"]
            body = await self._get(
                client,
                f"{self.config.base_url.rstrip('/')}/v1/forecast",
                {
                    "latitude": f"{latitude:.4f}",
                    "longitude": f"{longitude:.4f}",
                    "current": CURRENT,
                    "timezone": "auto",
                },
            )
        return _report(body, place, latitude, longitude)

    async def _geocode(self, client: httpx.AsyncClient, location: str) -> dict[str, Any]:
        body = await self._get(
            client,
            f"{self.config.geocoding_url.rstrip('/')}/v1/search",
            {"name": location, "count": "1", "language": "en", "format": "json"},
        )
        results = body.get("results")
        if not results:
            raise ToolFailed(f"no place named {location!r}")
        first = results[0] if isinstance(results, list) else None
        if not isinstance(first, dict):
            raise _unexpected()
        latitude, longitude = first.get("latitude"), first.get("longitude")
        if not (_number(latitude) and _number(longitude)):
            raise _unexpected()
        # Place names are short labels; anything long is not repeated to the model.
        parts = [first.get("name"), first.get("admin1"), first.get("country")]
        label = ", ".join(
            dict.fromkeys(p for p in parts if isinstance(p, str) and 0 < len(p) <= 100)
        )
        return {
            "name": label or location,
            "latitude": float(latitude),
            "longitude": float(longitude),
        }

    async def _get(
        self, client: httpx.AsyncClient, url: str, params: dict[str, str]
    ) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self.seconds):
                async with client.stream("GET", url, params=params) as response:
                    if response.status_code != 200:
                        raise ToolFailed(
                            f"the weather service answered HTTP {response.status_code}"
                        )
                    raw = bytearray()
                    async for piece in response.aiter_bytes():
                        raw += piece
                        if len(raw) > MAX_BODY_BYTES:
                            raise _unexpected()
        except (TimeoutError, httpx.TimeoutException):
            raise ToolFailed(
                f"the weather service did not answer within {self.seconds:g} s"
            ) from None
        except httpx.HTTPError:
            raise ToolFailed("the weather service could not be reached") from None
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise _unexpected() from None
        if not isinstance(body, dict):
            raise _unexpected()
        return body


def _report(
    body: dict[str, Any], place: dict[str, Any], latitude: float, longitude: float
) -> ToolOutput:
    current, units = body.get("current"), body.get("current_units") or {}
    if not isinstance(current, dict) or not isinstance(units, dict):
        raise _unexpected()
    values: dict[str, int | float] = {}
    for field in ("temperature_2m", "relative_humidity_2m", "wind_speed_10m", "weather_code"):
        value = current.get(field)
        if not _number(value):
            raise _unexpected()
        values[field] = value
    code = int(values["weather_code"])
    conditions = CONDITIONS.get(code, f"weather code {code}")
    temperature_unit = _unit(units, "temperature_2m", "°C")
    wind_unit = _unit(units, "wind_speed_10m", "km/h")
    when = current.get("time") if isinstance(current.get("time"), str) else None
    zone = body.get("timezone") if isinstance(body.get("timezone"), str) else None
    where = place.get("name") or f"{latitude:.4f}, {longitude:.4f}"
    text = (
        f"{where}: {values['temperature_2m']:g} {temperature_unit}, {conditions},"
        f" humidity {values['relative_humidity_2m']:g} %,"
        f" wind {values['wind_speed_10m']:g} {wind_unit}"
    )
    if when:
        text += f" (at {when}{' ' + zone if zone else ''})"
    data = {
        "location": place.get("name"),
        "latitude": latitude,
        "longitude": longitude,
        "time": when,
        "timezone": zone,
        "temperature": values["temperature_2m"],
        "temperature_unit": temperature_unit,
        "relative_humidity": values["relative_humidity_2m"],
        "wind_speed": values["wind_speed_10m"],
        "wind_speed_unit": wind_unit,
        "weather_code": code,
        "conditions": conditions,
    }
    return ToolOutput(text + ".", data=data)


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _unit(units: dict[str, Any], field: str, default: str) -> str:
    unit = units.get(field)
    # A unit is a short label; anything else from upstream is not repeated to the model.
    return unit if isinstance(unit, str) and 0 < len(unit) <= 12 else default


def _unexpected() -> ToolFailed:
    return ToolFailed("the weather service answered in an unexpected shape")


def weather_tool(config: WeatherToolConfig) -> FunctionTool:
    return FunctionTool(
        ToolSpec(
            NAME,
            "The current weather (temperature, conditions, humidity, wind) at a place,"
            " named or given by coordinates.",
            schema_of(WeatherArguments),
        ),
        WeatherTool(config),
    )
