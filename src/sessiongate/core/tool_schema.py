"""Checking a tool call's arguments against the tool's JSON Schema, at a bounded cost. Pure.

The one checker the tool registry (a model's tool call) and plan validation (a planner's
`tool_input`) share. A schema is data from whoever wrote the tool, an MCP server
included, so checking it must never reach the network, never run away and never fail
a turn:

- `$ref` resolves only inside the schema itself (and the meta-schemas jsonschema ships):
  the registry refuses every retrieval, so a schema naming `http://…` is never fetched.
- Each `pattern` (and `patternProperties` key) is judged before it runs
  (core/pattern_cost.py). The full check runs only when every string in the arguments
  is short enough for every pattern of the schema to finish in bounded time; a pattern
  that may backtrack exponentially, or that Python cannot compile, is never run.
- The full check runs against a deadline, looked at before every keyword.
- When the full check cannot be made (the schema is not valid JSON Schema, a `$ref`
  does not resolve locally, a pattern cannot be run, the deadline passes), the basic
  check stands in: the arguments' top-level required fields and the JSON types of the
  top-level properties. `ArgumentCheck.limited` says why; the tool judges the rest.

Callers on an event loop run `check_arguments` in a worker thread (agents/registry.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jsonschema
import referencing.exceptions
from referencing.jsonschema import EMPTY_REGISTRY, SchemaRegistry

from sessiongate.core.pattern_cost import UNLIMITED, pattern_limit

#: How long one full check may take before the basic check stands in.
DEFAULT_BUDGET_SECONDS = 0.25
#: A message a model reads is cut here (jsonschema's messages quote the value).
MAX_MESSAGE_CHARS = 300
#: Schemas and arguments bigger than this (in JSON values) get the basic check only.
MAX_SCHEMA_NODES = 10_000
MAX_ARGUMENT_NODES = 10_000
#: An array this long is never checked for `uniqueItems` (quadratic in jsonschema).
MAX_UNIQUE_ITEMS = 1000


@dataclass(frozen=True, slots=True)
class Mismatch:
    #: Where in the arguments: `a/0/b`, or "(top level)".
    where: str
    message: str


@dataclass(frozen=True, slots=True)
class ArgumentCheck:
    #: What is wrong with the arguments; None when they pass.
    mismatch: Mismatch | None = None
    #: Why only the basic check was made; None when the schema was checked in full.
    limited: str | None = None


class _OverBudget(Exception):
    pass


#: Resolves nothing beyond the schema itself (jsonschema adds the meta-schemas it ships)
#: and retrieves nothing: referencing's empty registry fails every retrieval
#: (NoSuchResource). Passing any registry also keeps jsonschema's deprecated remote
#: loader, which fetched whatever URL a `$ref` named, out of the way.
LOCAL_ONLY: SchemaRegistry = EMPTY_REGISTRY
_DEADLINE: ContextVar[float] = ContextVar("tool_schema_deadline", default=float("inf"))
_BOUNDED_CLASSES: dict[type[Any], type[Any]] = {}


def check_arguments(
    schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    *,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
) -> ArgumentCheck:
    """Whether `arguments` match `schema`, checked in full when that is safe and
    affordable, else by the basic check (see the module docstring)."""
    compiled = _compiled(schema)
    if compiled.validator is None:
        return _basic(schema, arguments, compiled.limited)
    nodes, longest = _measure(arguments)
    if nodes > MAX_ARGUMENT_NODES:
        return _basic(
            schema, arguments, f"the arguments hold more than {MAX_ARGUMENT_NODES} values"
        )
    if longest > compiled.max_subject:
        return _basic(
            schema,
            arguments,
            f"a string of {longest} characters is too long for the schema's patterns"
            f" (at most {compiled.max_subject} can be checked in bounded time)",
        )
    token = _DEADLINE.set(time.monotonic() + budget_seconds)
    try:
        validator = compiled.validator
        if validator.is_valid(arguments):
            return ArgumentCheck()
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except _OverBudget:
        return _basic(schema, arguments, f"the full check takes longer than {budget_seconds:g} s")
    except RecursionError:
        return _basic(schema, arguments, "the schema refers to itself without end")
    except referencing.exceptions.Unresolvable as exc:
        ref = _cut(str(getattr(exc, "ref", "?")), 200)
        outside = f"the schema refers to {ref!r}, which is not inside it (nothing is fetched)"
        return _basic(schema, arguments, outside)
    except Exception as exc:  # a schema from outside can break the validator in any way
        return _basic(schema, arguments, f"the schema cannot be evaluated ({_describe(exc)})")
    finally:
        _DEADLINE.reset(token)
    if error is None:
        return ArgumentCheck()
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    return ArgumentCheck(Mismatch(_cut(where, 200), _cut(error.message)))


def basic_check(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> Mismatch | None:
    """The top-level required fields and the JSON types of the top-level properties:
    cheap and safe on any schema, however malformed."""
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in arguments:
                return Mismatch("(top level)", f"{name!r} is a required property")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    for name, value in arguments.items():
        declared = properties.get(name)
        types = declared.get("type") if isinstance(declared, Mapping) else None
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            continue
        known = [n for n in names if n in _JSON_TYPES]
        if known and not any(_JSON_TYPES[n](value) for n in known):
            wanted = " or ".join(repr(n) for n in known)
            return Mismatch(name, _cut(f"{value!r} is not of type {wanted}"))
    return None


# --- the full check, compiled once per schema --------------------------------------


@dataclass(frozen=True, slots=True)
class _Compiled:
    validator: Any  # a jsonschema validator, or None when only the basic check can run
    max_subject: int = UNLIMITED
    limited: str | None = None


#: By the id of the schema (kept beside it, so a recycled id is never trusted): compiling
#: costs far more than checking, and a tool's schema lives as long as its tool. Bounded,
#: since an MCP server may send new lists forever.
_COMPILED: dict[int, tuple[Mapping[str, Any], _Compiled]] = {}
_MAX_COMPILED = 512
_COMPILED_LOCK = threading.Lock()


def _compiled(schema: Mapping[str, Any]) -> _Compiled:
    cached = _COMPILED.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    compiled = _compile(schema)
    with _COMPILED_LOCK:  # checks run in worker threads
        if len(_COMPILED) >= _MAX_COMPILED:
            _COMPILED.pop(next(iter(_COMPILED)), None)
        _COMPILED[id(schema)] = (schema, compiled)
    return compiled


def _compile(schema: Mapping[str, Any]) -> _Compiled:
    patterns: list[str] = []
    for node_count, node in enumerate(_walk(schema), start=1):
        if node_count > MAX_SCHEMA_NODES:
            return _Compiled(None, limited=f"the schema holds more than {MAX_SCHEMA_NODES} values")
        if isinstance(node, Mapping):
            if isinstance(node.get("pattern"), str):
                patterns.append(node["pattern"])
            if isinstance(node.get("patternProperties"), Mapping):
                patterns.extend(str(key) for key in node["patternProperties"])
    max_subject = UNLIMITED
    for pattern in patterns:
        limit = pattern_limit(pattern)
        if limit.refused is not None:
            return _Compiled(
                None, limited=f"the pattern {_cut(pattern, 80)!r} is not run: {limit.refused}"
            )
        max_subject = min(max_subject, limit.max_subject)
    dialect = schema.get("$schema")
    base = jsonschema.validators.validator_for(
        {"$schema": dialect} if isinstance(dialect, str) else {},
        default=jsonschema.Draft202012Validator,
    )
    bounded = _bounded_class(base)
    token = _DEADLINE.set(time.monotonic() + DEFAULT_BUDGET_SECONDS)
    try:
        meta = bounded(base.META_SCHEMA, registry=LOCAL_ONLY)
        problem = jsonschema.exceptions.best_match(meta.iter_errors(schema))
    except Exception as exc:  # the meta-schema check itself failed: treat as invalid
        return _Compiled(None, limited=f"the schema cannot be read ({_describe(exc)})")
    finally:
        _DEADLINE.reset(token)
    if problem is not None:
        return _Compiled(
            None, limited=f"the schema is not valid JSON Schema ({_cut(problem.message)})"
        )
    return _Compiled(bounded(schema, registry=LOCAL_ONLY), max_subject)


def _bounded_class(base: type[Any]) -> type[Any]:
    """`base` with every keyword looking at the deadline first, and `uniqueItems` refusing
    arrays it would take quadratic time over."""
    bounded = _BOUNDED_CLASSES.get(base)
    if bounded is None:
        keywords = {name: _with_deadline(check) for name, check in base.VALIDATORS.items()}
        if "uniqueItems" in keywords:
            unique = _bounded_unique(base.VALIDATORS["uniqueItems"])
            keywords["uniqueItems"] = _with_deadline(unique)
        # (jsonschema's `extend` is untyped; it returns a validator class)
        bounded = jsonschema.validators.extend(base, validators=keywords)  # type: ignore[no-untyped-call]
        _BOUNDED_CLASSES[base] = bounded
    return bounded


Keyword = Callable[[Any, Any, Any, Any], Any]


def _with_deadline(check: Keyword) -> Keyword:
    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if time.monotonic() > _DEADLINE.get():
            raise _OverBudget
        return check(validator, value, instance, schema)

    return bounded


def _bounded_unique(check: Keyword) -> Keyword:
    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, list) and len(instance) > MAX_UNIQUE_ITEMS:
            raise _OverBudget
        return check(validator, value, instance, schema)

    return bounded


# --- helpers -------------------------------------------------------------------------


def _walk(value: Any) -> Iterator[Any]:
    """Every JSON value inside `value`, itself first; iterative (no recursion limit)."""
    pending = [value]
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, Mapping):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def _measure(arguments: Mapping[str, Any]) -> tuple[int, int]:
    """How many values the arguments hold, and their longest string (keys included)."""
    nodes = longest = 0
    for node in _walk(arguments):
        nodes += 1
        if nodes > MAX_ARGUMENT_NODES:
            break
        if isinstance(node, str):
            longest = max(longest, len(node))
        elif isinstance(node, Mapping):
            longest = max([longest, *(len(str(key)) for key in node)])
    return nodes, longest


def _basic(
    schema: Mapping[str, Any], arguments: Mapping[str, Any], why: str | None
) -> ArgumentCheck:
    return ArgumentCheck(basic_check(schema, arguments), limited=why)


def _cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return _cut(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, 200)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": _is_number,
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or v.is_integer()),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
