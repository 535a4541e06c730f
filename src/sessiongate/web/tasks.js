// The caller's tasks: add, filter by status, tick off, page through.

import { enc } from "./api.js";
import { $, clear, el, errorEl } from "./dom.js";

export function createTasks(api, root) {
  const list = $("#task-list", root);
  const more = $("#tasks-more", root);
  const status = $("#tasks-status", root);
  const filter = $("#task-filter", root);
  let after = null;

  function item(task) {
    const box = el("input", { type: "checkbox", checked: task.status === "done", id: `task-${task.id}` });
    box.addEventListener("change", async () => {
      const wanted = box.checked ? "done" : "open";
      try {
        await api.patch(`/v1/tasks/${enc(task.id)}`, { status: wanted });
        await load(); // under a status filter the task leaves the list
        status.replaceChildren(el("span", {}, `${task.title}: ${wanted}.`));
      } catch (error) {
        box.checked = !box.checked;
        status.replaceChildren(errorEl(error));
      }
    });
    return el(
      "li",
      { class: "task" },
      box,
      el("label", { for: box.id }, task.title),
      task.due ? el("span", { class: "muted small" }, ` due ${task.due}`) : null,
      task.source ? el("span", { class: "muted small" }, ` from ${task.source.key}`) : null,
    );
  }

  async function load(page = null) {
    status.replaceChildren();
    try {
      const which = filter.value ? `&status=${enc(filter.value)}` : "";
      const cursor = page ? `&after=${enc(page)}` : "";
      const answer = await api.get(`/v1/tasks?limit=50${which}${cursor}`);
      if (!page) clear(list);
      list.append(...answer.tasks.map(item));
      if (answer.tasks.length === 0 && !page) list.append(el("li", { class: "muted" }, "No tasks."));
      after = answer.next_after;
      more.hidden = !after;
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }

  $("#task-form", root).addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const title = $("#task-title", form).value.trim();
    const due = $("#task-due", form).value;
    try {
      await api.post("/v1/tasks", due ? { title, due } : { title });
      form.reset();
      await load();
      status.replaceChildren(el("span", {}, `Task added: ${title}.`));
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  });
  filter.addEventListener("change", () => load());
  more.addEventListener("click", () => load(after));
  return { load };
}
