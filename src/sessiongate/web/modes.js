// The caller's modes (GET /v1/me): unlock for a while, lock again, and the unlock record.

import { enc } from "./api.js";
import { $, clear, el, errorEl, timeEl } from "./dom.js";

/** What a mode's state reads as: "Unlocked until …", "Locked" or "Not enabled". */
function stateText(mode) {
  if (mode.unlocked) return ["Unlocked until ", timeEl(mode.expires_at)];
  return mode.enabled ? "Locked" : "Not enabled";
}

function unlockLine(unlock) {
  const ended = unlock.locked_at
    ? [" → locked ", timeEl(unlock.locked_at), unlock.locked_by ? ` by ${unlock.locked_by}` : ""]
    : [" → until ", timeEl(unlock.expires_at)];
  return el("li", {}, `${unlock.mode}: unlocked `, timeEl(unlock.unlocked_at), ended);
}

export function createModes(api, root) {
  const list = $("#mode-list", root);
  const history = $("#unlock-list", root);
  const status = $("#modes-status", root);

  /** Unlock or lock, then show the new state; focus goes back to the mode's TTL field
   *  (the buttons are rebuilt, so the one pressed is gone). */
  async function act(name, path, body) {
    status.replaceChildren();
    try {
      await api.post(path, body);
      await load();
      status.replaceChildren(el("span", {}, path.endsWith("/lock") ? `${name} locked.` : `${name} unlocked.`));
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
    document.getElementById(`ttl-${name}`)?.focus();
  }

  function item(mode) {
    const ttl = el("input", { id: `ttl-${mode.name}`, placeholder: "e.g. 30m", size: "6" });
    const unlockPath = `/v1/modes/${enc(mode.name)}/unlock`;
    const controls = mode.enabled
      ? [
          el("label", { for: ttl.id }, `Unlock ${mode.name} for`),
          ttl,
          el(
            "button",
            {
              type: "button",
              onclick: () => act(mode.name, unlockPath, ttl.value.trim() ? { ttl: ttl.value.trim() } : {}),
            },
            `Unlock ${mode.name}`,
          ),
          el(
            "button",
            { type: "button", class: "quiet", onclick: () => act(mode.name, `/v1/modes/${enc(mode.name)}/lock`, {}) },
            `Lock ${mode.name}`,
          ),
        ]
      : [el("span", { class: "muted" }, "An admin enables modes for you.")];
    return el(
      "li",
      { class: "card", dataset: { mode: mode.name } },
      el("h3", {}, mode.name),
      el("p", { class: "state" }, stateText(mode)),
      el("div", { class: "row" }, controls),
    );
  }

  async function load() {
    try {
      const me = await api.get("/v1/me");
      clear(list);
      list.append(...me.modes.map(item));
      if (me.modes.length === 0) list.append(el("li", { class: "muted" }, "No modes are configured."));
      clear(history);
      history.append(...me.unlocks.map(unlockLine));
      if (me.unlocks.length === 0) history.append(el("li", { class: "muted" }, "No unlocks yet."));
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }
  return { load };
}
