"""The tool registry: every tool source, which tools an agent offers to whom, and one call
from raw model arguments to a result the model can read.

The rules (DESIGN.md §7):
- An agent offers only the tools its `tools` list names (names or globs); a user who is
  not primary gets only those that also match `tools_non_primary` when it is set.
- Arguments arrive as the model's JSON text. Text that is not a JSON object, or an object
  that does not match the tool's JSON Schema, is answered with an `error` result that
  says what is wrong, so the model can try again. So is an unknown or unoffered tool.
  The schema is checked off the event loop at a bounded cost (core/tool_schema.py): a
  schema the gateway cannot check safely in full is checked in part, never fatally.
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

from sessiongate.agents.tools import Tool, ToolContext, ToolFailed, ToolOutput, ToolSource
from sessiongate.config.tools import TOOL_NAME
from sessiongate.core.tool_schema import ArgumentCheck, basic_check, check_arguments
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


#: The longest one full schema check may take (in a worker thread) before the basic check
#: stands in (core/tool_schema.py); the thread is waited for a little longer than that.
SCHEMA_CHECK_BUDGET = 0.25
_SCHEMA_CHECK_WAIT = SCHEMA_CHECK_BUDGET + 1.0
#: Tools whose schema could only be checked in part, already logged (bounded).
_LIMITED_LOGGED: set[tuple[str, str]] = set()


def decode_arguments(raw: str) -> dict[str, Any]:
    """The model's argument text as a dict, or InvalidArguments saying what is wrong."""
    try:
        value = json.loads(raw or "{}")
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidArguments(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidArguments("arguments must be a JSON object")
    return value


async def parse_arguments(raw: str, spec: ToolSpec) -> dict[str, Any]:
    """The model's argument text as a dict that matches the tool's schema, or
    InvalidArguments with a message a model can act on. The schema is checked in a
    worker thread, at a bounded cost (core/tool_schema.py): a tool's schema may come from
    an MCP server, and nothing it holds may stall the event loop or fail the turn."""
    value = decode_arguments(raw)
    schema = spec.parameters
    try:
        async with asyncio.timeout(_SCHEMA_CHECK_WAIT):
            check = await asyncio.to_thread(
                check_arguments, schema, value, budget_seconds=SCHEMA_CHECK_BUDGET
            )
    except TimeoutError:  # a single step overran (the deadline is checked between steps)
        check = ArgumentCheck(basic_check(schema, value), "the full check did not finish")
    if check.limited is not None:
        _log_limited(spec.name, check.limited)
    if check.mismatch is not None:
        raise InvalidArguments(
            f"arguments do not match the tool's schema at {check.mismatch.where}:"
            f" {check.mismatch.message}"
        )
    return value


def _log_limited(tool: str, why: str) -> None:
    """Once per tool and reason: the operator should know a tool's schema is only partly
    checked, without a line per call."""
    if (tool, why) in _LIMITED_LOGGED:
        return
    if len(_LIMITED_LOGGED) >= 512:
        _LIMITED_LOGGED.clear()
    _LIMITED_LOGGED.add((tool, why))
    log.warning("tool_schema_checked_in_part", extra={"tool": tool, "reason": why})


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
        """Close every source at once: each MCP server's close is bounded, but one after
        another they would add up at shutdown."""

        async def close(source: ToolSource) -> None:
            try:
                await source.aclose()
            except Exception:  # one source failing to close must not keep others open
                log.exception("tool_source_close_failed", extra={"source": source.name})

        await asyncio.gather(*(close(source) for source in self.sources))

    async def all_tools(self, patterns: Sequence[str] | None = None) -> dict[str, Tool]:
        """Every tool, or only those of sources that could match `patterns` (an MCP
        server whose prefix no pattern can match is never asked, so never started)."""
        wanted = [
            source
            for source in self.sources
            if patterns is None or _source_may_match(source.name, patterns)
        ]
        # Together: a server that is slow to answer (or down) costs one wait, not one each.
        listed = await asyncio.gather(*(_tools_of(source) for source in wanted))
        found: dict[str, Tool] = {}
        for source, tools in zip(wanted, listed, strict=True):
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
            arguments = await parse_arguments(raw_arguments, tool.spec)
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


async def _tools_of(source: ToolSource) -> Sequence[Tool]:
    try:
        return await source.tools()
    except Exception as exc:  # an unreachable source offers nothing this turn
        log.warning(
            "tool_source_unavailable",
            extra={"source": source.name, "error": type(exc).__name__, "reason": str(exc)[:500]},
        )
        return ()


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
