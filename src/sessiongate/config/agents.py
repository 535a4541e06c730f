"""Configuration of agents (`[agents.defaults]`, `[agents.<name>]`): models, prompt and
context, limits of a turn and its tools, the runner, the safety gate and output
contract, voice, hand-off and task extraction. Resolved into profiles by
service/agents.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from sessiongate.config.base import Duration, Section
from sessiongate.config.handoff import HandoffConfig
from sessiongate.config.hooks import ExtractTasksFor
from sessiongate.config.memory import MemoryConfig
from sessiongate.config.routing import ActionsPolicy, ClassifierConfig, OutputContract
from sessiongate.config.tools import Runner, check_tool_patterns
from sessiongate.config.working_set import WorkingSetConfig

#: The hosted tools (Responses API) an agent may run as one of its own.
HostedTool = Literal["web_search", "web_search_preview"]


class AgentConfig(Section):
    """Every field is optional: a named agent inherits what it leaves unset from
    `[agents.defaults]`."""

    model: str | None = None
    fallback_models: list[str] | None = None
    control_model: str | None = None
    control_fallback_models: list[str] | None = None
    memory_window: int | None = Field(None, ge=1, le=10_000)
    token_budget: int | None = Field(None, ge=256)
    #: The working set: the reply's reserve, compaction (config/working_set.py).
    context: WorkingSetConfig | None = None
    #: Memory items: injection and extraction (config/memory.py, DESIGN.md §13).
    memory: MemoryConfig | None = None
    system_prompt: str | None = None
    context_files: list[str] | None = None
    #: The longest a whole turn may run (rotation, model calls, tools) before it is cut
    #: short and its key freed; a client that leaves does not extend it.
    turn_timeout: Duration | None = None
    #: `chat` (the native function-calling loop) or `plan_execute` (seed 002's planner,
    #: worker and explainer).
    runner: Runner | None = None
    #: Tools offered to the model: names or globs (`notes_*`, `time__*`, `agent__*`).
    #: Nothing is offered unless listed.
    tools: list[str] | None = None
    #: For users who are not primary, only the tools that also match one of these.
    tools_non_primary: list[str] | None = None
    #: One tool call, from start to result; a call over it returns an error result.
    tool_timeout: Duration | None = None
    #: Tool calls of one model step that run at once.
    max_parallel_tools: int | None = Field(None, ge=1, le=64)
    #: Model steps that may ask for tools in one turn; then one last call without tools.
    max_tool_steps: int | None = Field(None, ge=1, le=100)
    #: What the model sees of one tool result (head and tail, the cut marked); the store
    #: keeps the whole result.
    max_tool_result_chars: int | None = Field(None, ge=200, le=10_000_000)
    #: plan_execute: the model that writes the plan (default: the reply model).
    planner_model: str | None = None
    #: plan_execute: the most steps a plan may hold.
    max_plan_steps: int | None = Field(None, ge=1, le=50)
    #: Seed 004's safety gate before the reply model (unset: no gate).
    classifier: ClassifierConfig | None = None
    #: `script_delimiter`: the reply is a script, `---DELIMITER---`, the answer to speak.
    output_contract: OutputContract | None = None
    #: What happens to the script of a valid `script_delimiter` reply labelled AGENT.
    actions: ActionsPolicy | None = None
    #: `none`: a stateless agent: nothing is kept, the OpenAI client's message list is the
    #: whole context (one-shot requests such as a UI's title generation).
    history: Literal["keep", "none"] | None = None
    #: The `[voices]` entry replies are spoken with (`speak: true`) unless a mode has one.
    voice: str | None = None
    #: Seed 000's hybrid hand-off after the reply (unset: none; config/handoff.py).
    handoff: HandoffConfig | None = None
    #: After a complete reply, the control model pulls tasks from the exchange into the
    #: user's tasks (in the background); for whom, and with which model (default: the
    #: agent's control_model).
    extract_tasks: bool | None = None
    extract_tasks_for: ExtractTasksFor | None = None
    extract_tasks_model: str | None = None
    #: Who may name this agent beyond what their routes and seed endpoints give them:
    #: `"*"`, user names, `"primary"`, `"admin"`. An agent with `actions = "sandbox"` is
    #: for these alone, `["primary", "admin"]` when unset (core/agent_access.py).
    users: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = None
    #: More models a key's override (`PATCH /v1/sessions/{key}`) may pick for this agent,
    #: beside its model, fallbacks and control models.
    models: list[str] | None = None
    #: The Responses API's hosted tools this agent runs as one of its own tools, e.g.
    #: `{web_search = "web__search"}` (a built-in tool or an MCP `server__tool`): the model
    #: is offered it under the hosted name, the gateway runs the equivalent and the
    #: response shows a `web_search_call` item. A hosted tool without one is left out and
    #: said (`X-Hosted-Tools-Dropped`).
    hosted_tools: dict[HostedTool, Annotated[str, Field(min_length=1, max_length=200)]] | None = (
        None
    )

    @field_validator("tools", "tools_non_primary")
    @classmethod
    def _tool_patterns(cls, value: list[str] | None) -> list[str] | None:
        return check_tool_patterns(value)
