// DOM building without HTML strings: every text from the server goes in as a text node,
// so nothing it contains can become markup.

/** el("button", {type: "button", onclick}, "Send") → <button type="button">Send</button>.
 *  Keys starting with "on" add listeners; "dataset", "aria-*" and others become attributes
 *  (false / null / undefined leave them out). Children may be nodes, strings or arrays. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(node.dataset, value);
    } else if (name === "text") {
      node.textContent = value;
    } else if (name in node && typeof value !== "string") {
      node[name] = value; // properties such as `open` or `disabled` given as booleans
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
  return parent;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function $(selector, root = document) {
  const found = root.querySelector(selector);
  if (!found) throw new Error(`missing element ${selector}`);
  return found;
}

/** A <time> showing the local date and time of an ISO stamp (or nothing for null). */
export function timeEl(iso) {
  if (!iso) return el("span", { class: "muted" }, "never");
  const date = new Date(iso);
  return el("time", { datetime: iso, title: iso }, date.toLocaleString());
}

export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/** A modal dialog (native <dialog>: focus stays inside, Escape closes it) removed from the
 *  page when it closes. `build(body, close)` fills it. */
export function openDialog(title, build) {
  const titleId = `dialog-${Math.random().toString(36).slice(2)}`;
  const body = el("div", { class: "dialog-body" });
  const dialog = el(
    "dialog",
    { "aria-labelledby": titleId },
    el(
      "div",
      { class: "dialog-head" },
      el("h2", { id: titleId }, title),
      el("button", { type: "button", class: "quiet", onclick: () => dialog.close() }, "Close"),
    ),
    body,
  );
  const opener = document.activeElement;
  dialog.addEventListener("close", () => {
    dialog.remove();
    if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
  });
  document.body.append(dialog);
  build(body, () => dialog.close());
  dialog.showModal();
  return dialog;
}

/** A visible error with its code, for the gateway's `{"error": {code, message}}`. */
export function errorEl(error) {
  return el(
    "p",
    { class: "error", role: "alert" },
    el("code", {}, error.code || "error"),
    " ",
    error.message || String(error),
  );
}

/** Shows the end of a transcript: scrolls the transcript itself where it scrolls (wide
 *  screens), else the page, and only when the reader was already near the end, so
 *  reading back is not interrupted. */
export function scrollToEnd(box, { always = false } = {}) {
  const own = getComputedStyle(box).overflowY === "auto";
  const scroller = own ? box : document.scrollingElement;
  const view = own ? box.clientHeight : window.innerHeight;
  const nearEnd = scroller.scrollHeight - scroller.scrollTop - view < 120;
  if (always || nearEnd) scroller.scrollTop = scroller.scrollHeight;
}
