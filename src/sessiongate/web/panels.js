// The per-key panels: the context viewer, recall, overrides, export and import.

import { enc } from "./api.js";
import { append, clear, el, errorEl, openDialog, pretty, timeEl } from "./dom.js";

function field(label, input) {
  const id = `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return el("div", { class: "field" }, el("label", { for: id }, label), input);
}

function submitting(form, action) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("[type=submit]");
    button.disabled = true;
    form.querySelector(".error")?.remove();
    try {
      await action();
    } catch (error) {
      form.append(errorEl(error));
    } finally {
      button.disabled = false;
    }
  });
}

function fragmentItem(fragment, segmentName) {
  return el(
    "li",
    {},
    el(
      "div",
      { class: "who" },
      `${fragment.role} · score ${Number(fragment.score).toFixed(3)} · `,
      // Recall with scope "all" may find it in another of the user's keys: name it.
      fragment.key ? `${fragment.key} · ` : "",
      el("span", { dataset: { sessionId: fragment.session_id }, title: fragment.session_id }, segmentName(fragment.session_id)),
      " · ",
      timeEl(fragment.created_at),
    ),
    el("pre", {}, fragment.content),
    el("div", { class: "muted small" }, `Rationale: ${fragment.rationale}`),
  );
}

/** "What the model sees next": GET /v1/sessions/{key}/context. A recall queued for the
 *  next message is part of that turn's context, so it is run and shown too (the preview
 *  endpoint cannot know about it). */
export function showContext(api, key, { recall = null, segmentName = (id) => id } = {}) {
  openDialog(`Context of ${key}`, async (body) => {
    body.append(el("p", { class: "muted" }, "Loading…"));
    try {
      const [context, recalled] = await Promise.all([
        api.get(`/v1/sessions/${enc(key)}/context`),
        recall ? api.post(`/v1/sessions/${enc(key)}/recall`, recall) : null,
      ]);
      const fragments = recalled?.fragments || [];
      // Through `append`, which leaves out the null of "no recall" (replaceChildren would
      // write it as the text "null").
      append(clear(body), [
        el(
          "p",
          {},
          `About ${context.token_estimate} tokens, ${context.messages.length} messages`,
          context.dropped_messages ? `, ${context.dropped_messages} left out (memory window)` : "",
          ".",
        ),
        recall
          ? el(
              "section",
              { class: "recalled", "aria-label": "Recalled for your next message" },
              el("h3", {}, `Recalled for your next message: ${fragments.length} fragments`),
              el("ol", { class: "fragments" }, fragments.map((fragment) => fragmentItem(fragment, segmentName))),
            )
          : null,
        el(
          "ol",
          { class: "context" },
          context.messages.map((message) =>
            el(
              "li",
              {},
              el("div", { class: "who" }, message.role, el("span", { class: "muted small" }, ` ${message.source ?? ""}`)),
              el("pre", {}, pretty(message.content)),
            ),
          ),
        ),
      ]);
    } catch (error) {
      body.replaceChildren(errorEl(error));
    }
  });
}

/** Recall from archived segments with a rationale; optionally for the next message. */
export function showRecall(api, key, useForNextTurn, segmentName = (id) => id) {
  openDialog(`Recall in ${key}`, (body, close) => {
    const query = el("input", { required: true, maxlength: "2000" });
    const rationale = el("input", { required: true, maxlength: "2000" });
    const limit = el("input", { type: "number", min: "1", max: "50", value: "5" });
    const scope = el(
      "select",
      {},
      el("option", { value: "key" }, `${key} only`),
      el("option", { value: "all" }, "all my conversations"),
    );
    const results = el("div", { "aria-live": "polite" });
    const form = el(
      "form",
      {},
      field("What to look for", query),
      field("Why (kept with the turn)", rationale),
      field("How many fragments", limit),
      field("Look in", scope),
      el(
        "div",
        { class: "row" },
        el("button", { type: "submit" }, "Search history"),
        el(
          "button",
          {
            type: "button",
            class: "quiet",
            onclick: () => {
              if (!form.reportValidity()) return;
              useForNextTurn({
                query: query.value,
                rationale: rationale.value,
                limit: Number(limit.value),
                scope: scope.value,
              });
              close();
            },
          },
          "Use in my next message",
        ),
      ),
    );
    submitting(form, async () => {
      const answer = await api.post(`/v1/sessions/${enc(key)}/recall`, {
        query: query.value,
        rationale: rationale.value,
        limit: Number(limit.value),
        scope: scope.value,
      });
      results.replaceChildren(
        el("h3", {}, `${answer.fragments.length} fragments`),
        el(
          "ol",
          { class: "fragments" },
          answer.fragments.map((fragment) => fragmentItem(fragment, segmentName)),
        ),
      );
    });
    body.append(form, results);
  });
}

const TRI_STATE = [
  ["", "as configured"],
  ["on", "on"],
  ["off", "off"],
];

/** Per-session overrides: PATCH /v1/sessions/{key}; an empty field removes one. */
export function showOverrides(api, key, current, onSaved) {
  openDialog(`Settings of ${key}`, (body, close) => {
    const lifecycle = current?.lifecycle || current || {};
    const text = (value) => el("input", { value: value ?? "" });
    const control = text(current?.control_model);
    const reply = text(current?.reply_model);
    const idle = text(lifecycle.idle_window);
    const day = text(lifecycle.day_boundary);
    const semantic = el(
      "select",
      {},
      TRI_STATE.map(([value, label]) => el("option", { value }, label)),
    );
    semantic.value = lifecycle.semantic_enabled == null ? "" : lifecycle.semantic_enabled ? "on" : "off";
    const threshold = el("input", {
      type: "number",
      min: "0",
      max: "1",
      step: "0.05",
      value: lifecycle.semantic_threshold ?? "",
    });
    const orNull = (input) => (input.value.trim() === "" ? null : input.value.trim());
    const form = el(
      "form",
      {},
      el("p", { class: "muted" }, "Leave a field empty to use the configured value."),
      field("Control model", control),
      field("Reply model", reply),
      field("Idle window (e.g. 12h, off)", idle),
      field("Day boundary (e.g. 04:00, off)", day),
      field("Semantic rotation", semantic),
      field("Semantic threshold (0–1)", threshold),
      el("button", { type: "submit" }, "Save settings"),
    );
    submitting(form, async () => {
      const answer = await api.patch(`/v1/sessions/${enc(key)}`, {
        control_model: orNull(control),
        reply_model: orNull(reply),
        lifecycle: {
          idle_window: orNull(idle),
          day_boundary: orNull(day),
          semantic_enabled: semantic.value === "" ? null : semantic.value === "on",
          semantic_threshold: threshold.value === "" ? null : Number(threshold.value),
        },
      });
      onSaved(answer.overrides);
      close();
    });
    body.append(form);
  });
}

/** Download the chain as JSON Lines (through a blob: the key stays in a header). */
export async function exportChain(api, key) {
  const response = await api.raw("GET", `/v1/sessions/${enc(key)}/export`);
  const url = URL.createObjectURL(await response.blob());
  const link = el("a", { href: url, download: `${key.replace(/[^\w.@-]/g, "_")}.jsonl` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Upload an export: POST /v1/import (optionally under another key name). */
export function showImport(api, onImported) {
  openDialog("Import a chain", (body, close) => {
    const file = el("input", { type: "file", accept: ".jsonl,application/x-ndjson,text/plain", required: true });
    const name = el("input", { maxlength: "200" });
    const form = el(
      "form",
      {},
      field("Export file (JSON Lines)", file),
      field("Import as key (optional)", name),
      el("button", { type: "submit" }, "Import"),
    );
    submitting(form, async () => {
      const text = await file.files[0].text();
      const query = name.value.trim() ? `?key=${enc(name.value.trim())}` : "";
      const response = await api.raw("POST", `/v1/import${query}`, {
        body: text,
        headers: { "Content-Type": "application/x-ndjson" },
      });
      const answer = await response.json();
      onImported(answer.key);
      close();
    });
    body.append(form);
  });
}
