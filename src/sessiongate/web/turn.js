// One turn on screen: the user's message, then everything the gateway says about it in the
// order it happened (rotation, route, classification, plan, tool steps, text, hand-off,
// action, end, audio, error). Live events and a resumed stream use the same code.

import { el, errorEl, pretty, timeEl } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { SpeechPlayer, rememberSpoken, spokenAudio } from "./speech.js";

const REASONS = {
  manual: "manual (/new)",
  idle: "idle gap",
  day_boundary: "day boundary",
  semantic: "new topic (semantic)",
  revert: "revert",
  fork: "fork (edited message)",
};

export function reasonLabel(reason) {
  return REASONS[reason] || reason || "first segment";
}

export function userMessage(content, when) {
  return el(
    "div",
    { class: "msg user" },
    el("div", { class: "who" }, "You", when ? [" · ", timeEl(when)] : null),
    el("div", { class: "text plain" }, content),
  );
}

function note(kind, ...children) {
  return el("p", { class: `note ${kind}` }, ...children);
}

function steps(summary, ...body) {
  return el("details", { class: "step" }, el("summary", {}, summary), ...body);
}

function block(label, value) {
  return [el("div", { class: "label" }, label), el("pre", {}, pretty(value))];
}

export class TurnView {
  /** `hooks.onRevert()` undoes a semantic rotation; `hooks.playAudio(url)` resolves to a
   *  blob: URL for an artifact. */
  constructor(hooks) {
    this.hooks = hooks;
    this.node = el("article", { class: "turn" });
    this.userNode = null;
    this.body = el("div", { class: "msg assistant" }, el("div", { class: "who" }, "Assistant"));
    this.node.append(this.body);
    this.texts = []; // [{node, text}] in order: text between other events
    this.tools = new Map();
    this.finished = false;
    this.turnId = null;
    this.speech = null;
    this.replayed = false; // a turn picked up after a reload: its audio is not played again
    this.frame = 0; // a pending animation frame that re-renders the streaming text
  }

  setUser(content) {
    this.userNode?.remove();
    this.userNode = userMessage(content);
    this.node.prepend(this.userNode);
  }

  /** Forget every event shown: a `start` event begins the turn again (a replay). */
  reset() {
    this.body.replaceChildren(el("div", { class: "who" }, "Assistant"));
    this.texts = [];
    this.tools.clear();
    this.finished = false;
    this.speech = null;
  }

  get text() {
    return this.texts.map((part) => part.text).join("");
  }

  apply(type, data) {
    const handler = this[`on_${type}`];
    if (handler) handler.call(this, data);
  }

  add(node) {
    this.body.append(node);
  }

  on_start(data) {
    this.reset();
    this.turnId = data?.turn_id || null;
  }

  on_token(data) {
    let last = this.texts[this.texts.length - 1];
    if (!last || last.node !== this.body.lastChild) {
      last = { node: el("div", { class: "text streaming" }), text: "", shown: null };
      this.texts.push(last);
      this.add(last.node);
    }
    last.text += data.content || "";
    this.scheduleRender();
  }

  /** Markdown while it streams, re-rendered at most once per animation frame (not per
   *  token): a frame rebuilds only the text parts that changed since the last one. */
  scheduleRender() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.renderTexts();
    });
  }

  renderTexts() {
    for (const part of this.texts) {
      if (part.shown === part.text) continue;
      part.shown = part.text;
      part.node.replaceChildren(renderMarkdown(part.text));
    }
  }

  /** The working set (docs/working_set.md): older messages summarised, or left out. */
  on_compaction(data) {
    const covers = data.covers || {};
    const carried = data.carried_from
      ? data.status === "waited"
        ? `The previous conversation (messages #1 to #${covers.last_seq}) was summarised and carried over; this reply waited for it.`
        : data.status === "pending"
          ? "The previous conversation's summary is not ready yet; this reply goes on without it."
          : "Summarising the previous conversation failed; nothing was carried over."
      : null;
    const text = carried
      ? carried
      : data.status === "done" || data.status === "waited"
        ? `Earlier messages #${covers.first_seq} to #${covers.last_seq} were summarised; the originals are kept.`
        : data.status === "failed"
          ? "Summarising earlier messages failed; nothing was lost."
          : data.status === "nothing_to_compact"
            ? "Nothing to summarise yet."
            : "This agent's context is not summarised.";
    this.add(note("compaction", text));
    this.hooks.onCompaction?.(data);
  }

  on_context_trimmed(data) {
    this.add(note("trimmed", `${data.dropped} older messages were left out of the model's context (${data.reason}).`));
  }

  on_rotation(data) {
    const revert =
      data.reason === "semantic"
        ? el("button", { type: "button", onclick: () => this.hooks.onRevert() }, "Revert")
        : null;
    this.add(
      note(
        "rotation",
        `New segment: ${reasonLabel(data.reason)}`,
        data.confidence != null ? ` (confidence ${data.confidence})` : "",
        " · ",
        timeEl(data.at || new Date().toISOString()),
        revert ? [" ", revert] : null,
      ),
    );
  }

  on_route(data) {
    const mode = data.mode ? `, mode ${data.mode}` : "";
    this.add(note("meta", `Routed to ${data.agent} on ${data.session_key}${mode} (${data.reason})`));
  }

  on_classification(data) {
    const by = data.deciding_model ? ` by ${data.deciding_model}` : "";
    const confidence = data.confidence != null ? ` (${data.confidence})` : "";
    this.add(note("meta", `Classified ${data.label}${confidence}${by}`));
  }

  on_plan(data) {
    const plan = Array.isArray(data.plan) ? data.plan : [];
    const items = plan.map((step) =>
      el(
        "li",
        {},
        step.tool ? el("code", {}, step.tool) : "answer",
        step.tool_input ? [" ", JSON.stringify(step.tool_input)] : null,
        step.description ? [" — ", step.description] : null,
      ),
    );
    this.add(steps(`Plan: ${plan.length} steps`, el("ol", {}, items)));
  }

  on_tool_start(data) {
    const summary = el("span", {}, `Tool ${data.name}: running`);
    const details = steps(summary, ...block("Input", data.input ?? {}));
    details.dataset.callId = data.call_id || "";
    this.tools.set(data.call_id, { details, summary });
    this.add(details);
  }

  on_tool_end(data) {
    let entry = this.tools.get(data.call_id);
    if (!entry) {
      this.on_tool_start({ call_id: data.call_id, name: data.name, input: null });
      entry = this.tools.get(data.call_id);
    }
    const took = data.duration_ms != null ? `, ${Math.round(data.duration_ms)} ms` : "";
    entry.summary.textContent = `Tool ${data.name}: ${data.status}${took}`;
    entry.details.classList.add(`status-${data.status}`);
    entry.details.append(...block("Output", data.output ?? ""));
  }

  on_context_log(data) {
    const log = Array.isArray(data.log) ? data.log : [];
    const items = log.map((entry) =>
      el("li", {}, `${entry.action ?? ""}: `, el("code", {}, pretty(entry.result ?? ""))),
    );
    this.add(steps(`Context log: ${log.length} entries`, el("ol", {}, items)));
  }

  on_handoff(data) {
    const why = data.message ? ` — ${data.message}` : "";
    this.add(note("meta", `Hand-off ${data.intent} → ${data.tool ?? "none"}: ${data.status}${why}`));
  }

  on_action(data) {
    this.add(steps(`Action for this device (${data.language})`, ...block("Script", data.script)));
  }

  on_action_result(data) {
    const exit = data.killed ? `killed (${data.reason})` : `exit ${data.exit_code}`;
    this.add(
      steps(
        `Action ran on the gateway: ${exit}`,
        ...block("Script", data.script ?? ""),
        ...block("Output", data.stdout ?? ""),
        ...block("Errors", data.stderr ?? ""),
      ),
    );
  }

  speechPlayer() {
    if (!this.speech) {
      this.speech = new SpeechPlayer((url) => this.hooks.playAudio(url), { quiet: this.replayed });
      this.add(this.speech.node);
    }
    return this.speech;
  }

  on_audio_part(data) {
    if (data.url) this.speechPlayer().addPart(data);
  }

  on_audio(data) {
    if (!data.url) {
      this.add(note("meta", `No audio: ${data.error ?? "unknown"}`));
      return;
    }
    rememberSpoken(this.turnId, data);
    this.speechPlayer().setWhole(data, { autoplay: true });
  }

  on_memory(data) {
    const said = { add: "Remembered", update: "Updated", delete: "No longer true" };
    for (const change of Array.isArray(data.changes) ? data.changes : []) {
      this.add(note("meta memory", `${said[change.op] ?? change.op}: ${change.text ?? ""}`));
    }
  }

  on_end(data) {
    this.finish();
    const usage = data.usage?.total_tokens != null ? ` · ${data.usage.total_tokens} tokens` : "";
    const status = data.status && data.status !== "complete" ? data.status : "";
    if (status) this.add(note("warn", `Reply ${status}`));
    this.add(note("meta", data.message_id ? `Done${usage}` : "Done"));
  }

  on_error(data) {
    this.finish();
    this.add(errorEl({ code: data.code, message: data.message }));
  }

  /** The text parts are complete: their last render, now rather than at the next frame. */
  finish() {
    if (this.finished) return;
    this.finished = true;
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.renderTexts();
    for (const part of this.texts) part.node.classList.remove("streaming");
  }
}

/** A stored message (from a segment's page) on screen. `fetchAudio(url)` resolves to a
 *  blob: URL for the audio this tab remembers of a spoken reply. */
export function storedMessage(message, { fetchAudio = null } = {}) {
  const node = storedNode(message);
  if (message.message_id && node instanceof HTMLElement) node.dataset.messageId = message.message_id;
  const turnId = message.metadata?.turn_id;
  if (turnId && node instanceof HTMLElement) {
    node.dataset.turnId = turnId;
    const audio = message.role === "assistant" && fetchAudio ? spokenAudio(turnId) : null;
    if (audio) {
      const player = new SpeechPlayer(fetchAudio, { quiet: true });
      player.setWhole(audio, { autoplay: false });
      node.append(player.node);
    }
  }
  return node;
}

function storedNode(message) {
  const status =
    message.status && message.status !== "complete"
      ? el("span", { class: "badge" }, message.status)
      : null;
  if (message.role === "user") {
    const node = userMessage(message.content, message.created_at);
    if (status) node.querySelector(".who").append(" ", status);
    const recalled = message.metadata?.recall;
    if (Array.isArray(recalled) && recalled.length) {
      // What this turn recalled from history and why (kept in its metadata).
      const why = [...new Set(recalled.map((fragment) => fragment.rationale))].join("; ");
      node.append(el("p", { class: "recall-note muted small" }, `Recalled ${recalled.length} fragments — why: ${why}`));
    }
    return node;
  }
  if (message.role === "tool") {
    const name = message.metadata?.name || "tool";
    const result = message.metadata?.status || "";
    return steps(`Tool ${name} result ${result}`.trim(), ...block("Output", message.content));
  }
  const calls = message.metadata?.tool_calls;
  const node = el(
    "div",
    { class: `msg ${message.role === "assistant" ? "assistant" : "system"}` },
    el(
      "div",
      { class: "who" },
      message.role === "assistant" ? "Assistant" : message.role,
      " · ",
      timeEl(message.created_at),
      status ? [" ", status] : null,
    ),
  );
  if (Array.isArray(calls)) {
    for (const call of calls) {
      const name = call.name || call.function?.name || "tool";
      let input = call.arguments ?? call.function?.arguments ?? call.input ?? {};
      try {
        if (typeof input === "string") input = JSON.parse(input); // shown indented
      } catch {
        // not JSON: shown as sent
      }
      node.append(steps(`Tool ${name} called`, ...block("Input", input)));
    }
  }
  if (message.content) {
    node.append(el("div", { class: "text" }, renderMarkdown(message.content)));
  }
  return node;
}
