"""The tool registry: every tool source, which tools an agent offers to whom, and one call
from raw model arguments to a result the model can read.

The rules (DESIGN.md §7):
- An agent offers only the tools its `tools` list names (names or globs); a user who is
  not primary gets only those that also match `tools_non_primary` when it is set.
- Arguments arrive as the model's JSON text. Text that is not a JSON object, or an object
  that does not match the tool's JSON Schema, is answered with an `error` result that
  says what is wrong, so the model can try again. So is an unknown or unoffered tool.
- A tool that raises, fails or runs past `tool_timeout` gives an `error` result; it never
  ends the turn.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from sessiongate.agents.tools import Tool, ToolContext, ToolFailed, ToolOutput, ToolSource
from sessiongate.config_tools import TOOL_NAME
from sessiongate.models.base import ToolSpec

log = logging.getLogger("sessiongate.tools")


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One finished call: what the model reads (`content`, whole: the context caps it)."""

    call_id: str
    name: str
    status: str  # ok | error | interrupted
    content: str
    duration_ms: int
    arguments: dict[str, Any] | None = None
    artifact_ids: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)


def select(names: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The names that match any of the patterns (exact names or globs), in name order."""
    return sorted(n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns))


def offered_names(
    available: Sequence[str],
    tools: Sequence[str],
    tools_non_primary: Sequence[str] | None,
    *,
    primary: bool,
) -> list[str]:
    chosen = select(available, tools)
    if not primary and tools_non_primary is not None:
        narrower = set(select(chosen, tools_non_primary))
        chosen = [n for n in chosen if n in narrower]
    return chosen


class InvalidArguments(Exception):
    pass


#: Validators by the id of the schema they check (with the schema itself, so a recycled id
#: is never trusted): building one costs more than validating, and a tool's schema object
#: lives as long as its tool. Bounded, since an MCP server may send new lists forever.
_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}
_MAX_VALIDATORS = 512


def _validator(schema: Mapping[str, Any]) -> Any:
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    validator = jsonschema.validators.validator_for(schema)(schema)
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.pop(next(iter(_VALIDATORS)))
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def parse_arguments(raw: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The model's argument text as a dict that matches `schema`, or InvalidArguments
    with a message a model can act on."""
    try:
        value = json.loads(raw or "{}")
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidArguments(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidArguments("arguments must be a JSON object")
    try:
        validator = _validator(schema)
        if validator.is_valid(value):  # the usual case: skip collecting errors
            return value
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except jsonschema.exceptions.SchemaError:
        # The tool's own schema is broken (a misbehaving MCP server): let the tool judge.
        return value
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise InvalidArguments(
            f"arguments do not match the tool's schema at {where}: {error.message}"
        )
    return value


class ToolRegistry:
    """Every tool from every source, by name. Sources are asked for their current list
    each time (an MCP server's list can change); a name two sources both claim goes to the
    first source, and the clash is logged."""

    def __init__(self, sources: Sequence[ToolSource] = ()) -> None:
        self.sources: list[ToolSource] = list(sources)

    def add_source(self, source: ToolSource) -> None:
        self.sources.append(source)

    async def start(self) -> None:
        for source in self.sources:
            await source.start()

    async def aclose(self) -> None:
        for source in self.sources:
            try:
                await source.aclose()
            except Exception:  # one source failing to close must not keep others open
                log.exception("tool_source_close_failed", extra={"source": source.name})

    async def all_tools(self, patterns: Sequence[str] | None = None) -> dict[str, Tool]:
        """Every tool, or only those of sources that could match `patterns` (an MCP
        server whose prefix no pattern can match is never asked, so never started)."""
        found: dict[str, Tool] = {}
        for source in self.sources:
            if patterns is not None and not _source_may_match(source.name, patterns):
                continue
            try:
                tools = await source.tools()
            except Exception as exc:  # an unreachable source offers nothing this turn
                log.warning(
                    "tool_source_unavailable",
                    extra={"source": source.name, "error": type(exc).__name__},
                )
                continue
            for tool in tools:
                name = tool.spec.name
                if not TOOL_NAME.fullmatch(name):
                    continue
                if name in found:
                    log.warning("tool_name_clash", extra={"tool": name, "source": source.name})
                    continue
                found[name] = tool
        return found

    async def offered(
        self,
        tools: Sequence[str],
        tools_non_primary: Sequence[str] | None,
        *,
        primary: bool,
    ) -> dict[str, Tool]:
        if not tools:
            return {}
        available = await self.all_tools(tools)
        names = offered_names(list(available), tools, tools_non_primary, primary=primary)
        return {name: available[name] for name in names}

    @staticmethod
    def specs(tools: Mapping[str, Tool]) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec for tool in tools.values())

    @staticmethod
    async def call(
        tools: Mapping[str, Tool],
        call_id: str,
        name: str,
        raw_arguments: str,
        context: ToolContext,
        *,
        limit_seconds: float,
    ) -> ToolResult:
        started = time.perf_counter()

        def done(
            status: str, content: str, arguments: dict[str, Any] | None, output: ToolOutput | None
        ) -> ToolResult:
            return ToolResult(
                call_id=call_id,
                name=name,
                status=status,
                content=content,
                duration_ms=round((time.perf_counter() - started) * 1000),
                arguments=arguments,
                artifact_ids=output.artifact_ids if output else (),
                data=output.data if output else {},
            )

        tool = tools.get(name)
        if tool is None:
            offered = ", ".join(tools) or "none"
            return done("error", f"error: no tool named {name!r} (offered: {offered})", None, None)
        try:
            arguments = parse_arguments(raw_arguments, tool.spec.parameters)
        except InvalidArguments as exc:
            return done("error", f"error: {exc}", None, None)
        try:
            async with asyncio.timeout(limit_seconds):
                output = await tool.call(arguments, context)
        except TimeoutError:
            return done(
                "error",
                f"error: the tool did not answer within {limit_seconds:g} s",
                arguments,
                None,
            )
        except ToolFailed as exc:
            return done("error", f"error: {exc.message}", arguments, None)
        except Exception as exc:  # a bug in a tool is the model's error result, not ours
            log.exception("tool_crashed", extra={"tool": name})
            return done("error", f"error: the tool failed ({type(exc).__name__})", arguments, None)
        status = "error" if output.is_error else "ok"
        return done(status, output.content, arguments, output)


def _source_may_match(source: str, patterns: Sequence[str]) -> bool:
    """Whether any pattern could name a tool of `source`. MCP sources name their tools
    `<server>__<tool>`; other sources (built-ins, agents) are always asked."""
    if not source.startswith("mcp:"):
        return True
    prefix = source[4:] + "__"
    probe = prefix + "x"
    return any(
        fnmatch.fnmatchcase(probe, p) or p.startswith(prefix) or p in ("*",) for p in patterns
    )
