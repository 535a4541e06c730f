"""The memory block of one turn (DESIGN.md §13, docs/memory.md): the items the memory
service chooses for the turn (`MemoryInjection.items_for_turn`), cut to what the agent's
budget leaves after the system text, the client's system messages, the recalled
fragments and the new message (core/memory.py `fit_memory`), before any raw message of
the thread is chosen. Memory never fails a turn: a store or search failure leaves the
turn without its block, logged."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sessiongate.core.context import MESSAGE_OVERHEAD_TOKENS, estimate_tokens, recalled_messages
from sessiongate.core.keys import KeyRef
from sessiongate.core.memory import Injected, fit_memory, memory_allowance, render_memory
from sessiongate.core.segments import RecallFragment
from sessiongate.service.agents import AgentProfile
from sessiongate.service.conversation.plan import ClientPlan
from sessiongate.service.memory import MemoryService
from sessiongate.service.turn.working_context import uses_working_set

log = logging.getLogger("sessiongate.memory")


def cost(text: str) -> int:
    """One context message's estimated tokens (the working set's own measure)."""
    return estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def memory_budget(agent: AgentProfile, ratio: float) -> int | None:
    """The budget the block must fit in, in estimated tokens: the agent's explicit
    `token_budget`, else its models' budget under the working set (corrected by the
    reply model's `ratio`), else none (a model without a window)."""
    if agent.token_budget is not None:
        return agent.token_budget
    budget = agent.context_budget
    if budget is not None and uses_working_set(agent.working_set, agent.token_budget, budget):
        return max(int(budget / ratio), 1)
    return None


def fit_turn_memory(
    agent: AgentProfile,
    chosen: Sequence[Injected],
    *,
    ratio: float,
    fragments: Sequence[RecallFragment],
    client_system: Sequence[str],
    newest: str | None,
) -> list[Injected]:
    """`chosen` within what the budget leaves after the fixed parts of the context and
    the newest message (lowest score first, pinned last; possibly nothing)."""
    if not chosen:
        return []
    fixed = [agent.system_prompt or "", *(f.content for f in agent.context_files)]
    fixed.extend(client_system)
    if newest:
        fixed.append(newest)
    tokens = sum(cost(text) for text in fixed if text)
    if fragments:
        ranked = sorted(fragments, key=lambda f: f.score, reverse=True)
        tokens += sum(cost(m.content) for m in recalled_messages(ranked))
    return fit_memory(chosen, memory_allowance(memory_budget(agent, ratio), tokens), cost)


async def choose_turn_memory(
    memory: MemoryService | None, ref: KeyRef, agent: AgentProfile, new_message: str | None
) -> list[Injected]:
    """The items a turn of `agent` on `ref` would receive before the budget; none when
    the engine has no memory, the policy is `off`, or reading them fails (logged)."""
    if memory is None or agent.memory.inject == "off":
        return []
    try:
        return await memory.injection.items_for_turn(
            ref.owner, agent.name, agent.memory, ref.name, new_message
        )
    except Exception:  # memory is an aid: the turn goes on without it
        log.exception("memory_injection_failed", extra={"agent": agent.name})
        return []


def memory_block(injected: Sequence[Injected]) -> str | None:
    """The one system message the items enter as, or None for none."""
    return render_memory(injected) if injected else None


async def turn_memory(
    memory: MemoryService | None,
    ref: KeyRef,
    agent: AgentProfile,
    content: str,
    fragments: Sequence[RecallFragment],
    plan: ClientPlan | None,
    ratio: float,
) -> list[Injected]:
    """The memory items a turn receives, chosen against its message and fitted to its
    budget, before its user message is stored (so the message's `metadata.memory` says
    exactly what the model was given)."""
    chosen = await choose_turn_memory(memory, ref, agent, content)
    return fit_turn_memory(
        agent,
        chosen,
        ratio=ratio,
        fragments=fragments,
        client_system=() if plan is None else plan.turn.system,
        newest=content,
    )
