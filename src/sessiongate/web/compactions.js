// The working set on the page (docs/working_set.md): in the latest segment, where earlier
// messages were summarised, a divider with the summary in force instead of the messages
// it covers. "Show original" expands the raw messages it covers, exactly as they were
// kept (the gateway never changes them); "Undo" reverts the compaction (the API's revert),
// so the next turn sends those messages raw again.

import { enc } from "./api.js";
import { el } from "./dom.js";
import { messageNodes } from "./sessions.js";

const ORIGINALS_PAGE = 1000;

/** The compaction in force on the key's latest segment, or null. */
export async function inForce(api, key) {
  const listed = await api.get(`/v1/sessions/${enc(key)}/compactions`);
  if (!listed.in_force) return null;
  return listed.compactions.find((each) => each.compaction_id === listed.in_force) || null;
}

function seqOf(node, sessionId) {
  const id = node.dataset.messageId || "";
  const cut = id.lastIndexOf(":");
  if (cut < 0 || id.slice(0, cut) !== sessionId) return null;
  return Number(id.slice(cut + 1));
}

/** Puts the divider for `record` into `transcript` (the latest segment's messages on
 *  screen): the messages it covers leave the transcript (they are behind "Show
 *  original"), the divider stands where they were. `onUndone()` runs after an undo. */
export function placeDivider(transcript, record, { api, key, announce, onUndone }) {
  transcript.querySelector(".compaction-divider")?.remove();
  if (!record) return null;
  const { first_seq: first, last_seq: last, count } = record.covers;
  let after = null; // the first message on screen after the covered span
  for (const node of [...transcript.querySelectorAll("[data-message-id]")]) {
    const seq = seqOf(node, record.session_id);
    if (seq === null) continue;
    if (seq >= first && seq <= last) node.remove();
    else if (seq > last && after === null) after = node;
  }
  const originalsId = `originals-${record.compaction_id}`;
  const originals = el("div", { id: originalsId, class: "originals", hidden: true });
  const show = el(
    "button",
    { type: "button", class: "quiet", "aria-expanded": "false", "aria-controls": originalsId },
    "Show original",
  );
  const undo = el("button", { type: "button", class: "quiet" }, "Undo");
  const divider = el(
    "section",
    {
      class: "compaction-divider",
      "aria-label": `Summary of messages ${first} to ${last}`,
      dataset: { compactionId: record.compaction_id },
    },
    el(
      "p",
      { class: "divider-title" },
      `Earlier messages summarised: #${first} to #${last} (${count} messages). `,
      "The model reads this summary instead; the originals are kept.",
    ),
    el("p", { class: "summary" }, record.summary),
    el("div", { class: "divider-actions" }, show, " ", undo),
    originals,
  );
  let loaded = false;
  show.addEventListener("click", async () => {
    const open = show.getAttribute("aria-expanded") === "true";
    if (!open && !loaded) {
      show.disabled = true;
      try {
        let cursor = first - 1;
        while (cursor < last) {
          const limit = Math.min(ORIGINALS_PAGE, last - cursor);
          const page = await api.get(
            `/v1/sessions/${enc(key)}/segments/${enc(record.session_id)}/messages?after=${cursor}&limit=${limit}`,
          );
          if (!page.messages.length) break;
          originals.append(...messageNodes(page.messages));
          cursor = page.messages[page.messages.length - 1].seq;
        }
        loaded = true;
      } finally {
        show.disabled = false;
      }
    }
    originals.hidden = open;
    show.setAttribute("aria-expanded", String(!open));
    show.textContent = open ? "Show original" : "Hide original";
    announce(open ? "Original messages hidden." : `Showing the ${count} original messages.`);
  });
  undo.addEventListener("click", async () => {
    undo.disabled = true;
    try {
      await api.post(
        `/v1/sessions/${enc(key)}/compactions/${enc(record.compaction_id)}/revert`,
        {},
      );
    } catch (error) {
      undo.disabled = false;
      divider.append(el("p", { class: "error", role: "alert" }, error.message || String(error)));
      return;
    }
    announce(`Summary undone: messages ${first} to ${last} are sent as they were again.`);
    await onUndone();
  });
  if (after) after.before(divider);
  else transcript.append(divider);
  return divider;
}
