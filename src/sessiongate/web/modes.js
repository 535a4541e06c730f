// The caller's modes (GET /v1/me): unlock for a while, lock again, and the unlock record.

import { enc } from "./api.js";
import { $, clear, el, errorEl, timeEl } from "./dom.js";

export function createModes(api, root) {
  const list = $("#mode-list", root);
  const history = $("#unlock-list", root);
  const status = $("#modes-status", root);

  async function act(path, body) {
    status.replaceChildren();
    try {
      await api.post(path, body);
      await load();
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }

  function item(mode) {
    const ttl = el("input", { id: `ttl-${mode.name}`, placeholder: "e.g. 30m", size: "6" });
    const controls = mode.enabled
      ? [
          el("label", { for: ttl.id }, `Unlock ${mode.name} for`),
          ttl,
          el(
            "button",
            {
              type: "button",
              onclick: () => act(`/v1/modes/${enc(mode.name)}/unlock`, ttl.value.trim() ? { ttl: ttl.value.trim() } : {}),
            },
            `Unlock ${mode.name}`,
          ),
          el(
            "button",
            { type: "button", class: "quiet", onclick: () => act(`/v1/modes/${enc(mode.name)}/lock`, {}) },
            `Lock ${mode.name}`,
          ),
        ]
      : [el("span", { class: "muted" }, "Not enabled for you (an admin enables modes).")];
    return el(
      "li",
      { class: "card" },
      el("h3", {}, mode.name),
      el(
        "p",
        {},
        mode.unlocked ? ["Unlocked until ", timeEl(mode.expires_at)] : mode.enabled ? "Locked" : "Not enabled",
      ),
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
      history.append(
        ...me.unlocks.map((unlock) =>
          el("li", {}, `${unlock.mode}: `, timeEl(unlock.unlocked_at), " → ", timeEl(unlock.locked_at || unlock.expires_at)),
        ),
      );
    } catch (error) {
      status.replaceChildren(errorEl(error));
    }
  }
  return { load };
}
