// The caller's notes: add, search, page through, delete.

import { enc } from "./api.js";
import { $, clear, el, errorEl, timeEl } from "./dom.js";

export function createNotes(api, root) {
  const list = $("#note-list", root);
  const more = $("#notes-more", root);
  const status = $("#notes-status", root);
  let before = null;

  function item(note) {
    return el(
      "li",
      { class: "card" },
      el("h3", {}, note.title || "Untitled"),
      el("p", { class: "muted small" }, note.source ? `${note.source} · ` : "", note.created_at ? timeEl(note.created_at) : `score ${Number(note.score).toFixed(3)}`),
      el("pre", { class: "plain" }, note.content),
      el(
        "button",
        {
          type: "button",
          class: "quiet",
          "aria-label": `Delete note ${note.title || note.id}`,
          onclick: async () => {
            try {
              await api.del(`/v1/notes/${enc(note.id)}`);
              await load();
            } catch (error) {
              status.replaceChildren(errorEl(error));
            }
          },
        },
        "Delete",
      ),
    );
  }

  async function load(query = "", page = null) {
    status.replaceChildren();
    try {
      const params = query ? `query=${enc(query)}&limit=20` : `limit=20${page ? `&before=${enc(page)}` : ""}`;
      const answer = await api.get(`/v1/notes?${params}`);
      if (!page) clear(list);
      list.append(...answer.notes.map(item));
      if (answer.notes.length === 0 && !page) list.append(el("li", { class: "muted" }, "No notes."));
      before = query ? null : answer.next_before;
      more.hidden = !before;
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }

  $("#note-form", root).addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const title = $("#note-title", form).value.trim();
    const content = $("#note-content", form).value;
    try {
      await api.post("/v1/notes", title ? { content, title } : { content });
      form.reset();
      await load();
      status.replaceChildren(el("span", {}, "Note added."));
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  });
  $("#note-search", root).addEventListener("submit", (event) => {
    event.preventDefault();
    load($("#note-query", root).value.trim());
  });
  more.addEventListener("click", () => load("", before));
  return { load };
}
