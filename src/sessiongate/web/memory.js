// The caller's memory items (DESIGN.md §13, docs/memory.md): what the assistant knows
// about them. List (replaced and forgotten-by-extraction items on request), add, edit
// (an edit keeps the old text in the history), pin and unpin, forget (gone for good),
// and where an item came from, with a link to the message it was said in.

import { enc } from "./api.js";
import { $, clear, el, errorEl, timeEl } from "./dom.js";

const MADE_BY = {
  user: "you",
  agent: "the assistant",
  extraction: "read from a conversation",
  import: "an import",
};

/** `openMessage(key, sessionId, messageId)` shows a message in its key's conversation. */
export function createMemory(api, root, { openMessage }) {
  const list = $("#memory-list", root);
  const more = $("#memory-more", root);
  const status = $("#memory-status", root);
  const history = $("#memory-history", root);
  let before = null;

  function say(text) {
    status.replaceChildren(el("span", {}, text));
  }

  async function act(action, done) {
    try {
      await action();
      await load();
      say(done);
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }

  function source(item) {
    const from = item.source;
    if (!from) return null;
    const messageId = from.message_ids?.[0] ?? null;
    const sessionId = from.session_id ?? (messageId ? messageId.split(":")[0] : null);
    return el(
      "a",
      {
        href: "#",
        class: "memory-source",
        onclick: (event) => {
          event.preventDefault();
          openMessage(from.key, sessionId, messageId);
        },
      },
      messageId ? `the message in ${from.key}` : from.key,
    );
  }

  function editor(item, node) {
    const box = el("textarea", { rows: "2", maxlength: "2000", required: true, "aria-label": "Edit memory" });
    box.value = item.text;
    const form = el(
      "form",
      { class: "memory-edit" },
      box,
      el(
        "div",
        { class: "row" },
        el("button", { type: "submit" }, "Save"),
        el("button", { type: "button", class: "quiet", onclick: () => load() }, "Cancel"),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = box.value.trim();
      if (!text || text === item.text) {
        load();
        return;
      }
      act(() => api.patch(`/v1/memory/${enc(item.id)}`, { text }), "Memory edited; the old text is kept in the history.");
    });
    node.querySelector(".memory-text").replaceWith(form);
    box.focus();
  }

  function row(item) {
    const valid = !item.invalid_at;
    const node = el(
      "li",
      { class: `card memory${valid ? "" : " invalid"}`, dataset: { memoryId: item.id } },
      el("p", { class: "memory-text" }, item.text),
      el(
        "p",
        { class: "muted small" },
        item.pinned ? [el("span", { class: "badge" }, "pinned"), " "] : null,
        valid ? null : [el("span", { class: "badge" }, item.superseded_by ? "replaced" : "no longer true"), " "],
        `By ${MADE_BY[item.created_by] ?? item.created_by} · `,
        timeEl(item.created_at),
        item.scope !== "user" ? ` · only for ${item.scope}` : null,
        item.source ? [" · from ", source(item)] : null,
      ),
    );
    if (valid) {
      const name = item.text.length > 40 ? `${item.text.slice(0, 40)}…` : item.text;
      node.append(
        el(
          "div",
          { class: "row" },
          el("button", { type: "button", class: "quiet", "aria-label": `Edit ${name}`, onclick: () => editor(item, node) }, "Edit"),
          el(
            "button",
            {
              type: "button",
              class: "quiet",
              "aria-label": `${item.pinned ? "Unpin" : "Pin"} ${name}`,
              onclick: () =>
                act(
                  () => api.patch(`/v1/memory/${enc(item.id)}`, { pinned: !item.pinned }),
                  item.pinned ? "Unpinned." : "Pinned: every conversation sees it.",
                ),
            },
            item.pinned ? "Unpin" : "Pin",
          ),
          el(
            "button",
            {
              type: "button",
              class: "quiet",
              "aria-label": `Forget ${name}`,
              onclick: () => act(() => api.del(`/v1/memory/${enc(item.id)}`), "Forgotten."),
            },
            "Forget",
          ),
        ),
      );
    }
    return node;
  }

  async function load(page = null) {
    try {
      const params = `limit=50${history.checked ? "&include_invalid=true" : ""}${page ? `&before=${enc(page)}` : ""}`;
      const answer = await api.get(`/v1/memory?${params}`);
      if (!page) clear(list);
      list.append(...answer.items.map(row));
      if (answer.items.length === 0 && !page) list.append(el("li", { class: "muted" }, "Nothing remembered yet."));
      before = answer.next_before;
      more.hidden = !before;
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }

  $("#memory-form", root).addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const text = $("#memory-text", form).value.trim();
    const pinned = $("#memory-pinned", form).checked;
    if (!text) return;
    act(async () => {
      await api.post("/v1/memory", { text, pinned });
      form.reset();
    }, "Remembered.");
  });
  history.addEventListener("change", () => load());
  more.addEventListener("click", () => load(before));
  return { load };
}
