// The page's entry: sign in and out, the views, and the chat view's wiring. The modules it
// imports hold the logic; this file connects them to the elements of index.html.

import { createApi, enc } from "./api.js";
import { createChat, loadPending } from "./chat.js";
import { $, clear, errorEl, scrollToEnd } from "./dom.js";
import { createModes } from "./modes.js";
import { createMemory } from "./memory.js";
import { createNotes } from "./notes.js";
import { createTasks } from "./tasks.js";
import { exportChain, showContext, showImport, showOverrides, showRecall } from "./panels.js";
import {
  PAGE,
  filterSessions,
  loadAllSessions,
  loadMessages,
  messageNodes,
  renderChain,
  renderSessionList,
  tailStart,
} from "./sessions.js";
import { TurnView } from "./turn.js";
import { inForce, placeDivider } from "./compactions.js";

const STORE = { apiKey: "sg.apiKey", key: "sg.key", view: "sg.view" };
/** The phone layout of app.css (one column, the page scrolls). */
const PHONE = window.matchMedia("(max-width: 640px)");

const state = {
  apiKey: sessionStorage.getItem(STORE.apiKey),
  key: sessionStorage.getItem(STORE.key),
  sessions: [],
  chain: null,
  shown: null, // the archived segment on screen, or null for the latest
  earliest: 0, // the seq before the first message shown (for "Load earlier")
  later: null, // the cursor of the next page of an archived segment
  recall: null, // a recall request for the next message
  compaction: null, // the latest segment's compaction in force (its divider), or null
  compactionChanged: false, // a turn announced a compaction: redraw after it
};

const api = createApi(() => state.apiKey);
const transcript = $("#transcript");
const announcer = $("#announcer");

function announce(text) {
  announcer.textContent = "";
  setTimeout(() => {
    announcer.textContent = text;
  }, 50);
}

async function playAudio(url) {
  const response = await api.raw("GET", url);
  return URL.createObjectURL(await response.blob());
}

const hooks = {
  onRevert: () => revert(),
  playAudio,
  onStart(data) {
    if (data.session_key && data.session_key !== state.key) setKey(data.session_key);
    // A resumed turn is drawn by its stream: its stored messages must not show twice.
    for (const node of transcript.querySelectorAll(`[data-turn-id="${CSS.escape(data.turn_id || "")}"]`)) {
      node.remove();
    }
  },
  reloadMessages: () => showLatest(),
  onCompaction(data) {
    if (data.compaction_id) state.compactionChanged = true; // the divider, after the turn
  },
};

const chat = createChat({
  api,
  transcript,
  announce,
  hooks,
  onTurnDone: () => {
    if (state.compactionChanged) {
      state.compactionChanged = false;
      refresh().then(() => showLatest());
      return;
    }
    refresh();
  },
});
const notes = createNotes(api, $("#notes-view"));
const tasks = createTasks(api, $("#tasks-view"));
const modes = createModes(api, $("#modes-view"));
const memory = createMemory(api, $("#memory-view"), { openMessage });

// ---- signing in and out ------------------------------------------------------------

async function signIn(key, { quiet = false } = {}) {
  const errorBox = $("#signin-error");
  errorBox.replaceChildren();
  state.apiKey = key;
  try {
    const me = await api.get("/v1/me");
    sessionStorage.setItem(STORE.apiKey, key);
    $("#whoami").textContent = `${me.name}${me.admin ? " (admin)" : me.primary ? " (primary)" : ""}`;
    await showQuota();
    $("#api-key").value = "";
    $("#signin-view").hidden = true;
    $("#views").hidden = false;
    $("#sign-out").hidden = false;
    await showView(sessionStorage.getItem(STORE.view) || "chat");
    await startChat();
    if (!$("#chat-view").hidden) {
      // On a phone the page opens at its top, the key list in view (the transcript's end
      // and the composer would scroll it away); the focus is in the message field all
      // the same.
      $("#message").focus({ preventScroll: PHONE.matches });
      if (PHONE.matches) window.scrollTo(0, 0);
    }
  } catch (error) {
    state.apiKey = null;
    sessionStorage.removeItem(STORE.apiKey);
    if (!quiet) errorBox.replaceChildren(errorEl(error));
  }
}

function signOut() {
  chat.forget();
  for (const name of Object.keys(sessionStorage)) {
    if (name.startsWith("sg.")) sessionStorage.removeItem(name);
  }
  Object.assign(state, { apiKey: null, key: null, sessions: [], chain: null, shown: null, recall: null });
  clear(transcript);
  clear($("#session-list"));
  clear($("#chain-list"));
  $("#whoami").textContent = "";
  $("#quota").textContent = "";
  $("#quota").hidden = true;
  for (const id of ["#chat-view", "#notes-view", "#tasks-view", "#memory-view", "#modes-view", "#views", "#sign-out"]) {
    $(id).hidden = true;
  }
  $("#signin-view").hidden = false;
  $("#api-key").focus();
}

// ---- views -------------------------------------------------------------------------

const VIEWS = {
  chat: "#chat-view",
  notes: "#notes-view",
  tasks: "#tasks-view",
  memory: "#memory-view",
  modes: "#modes-view",
};

async function showView(name) {
  if (!VIEWS[name]) name = "chat";
  sessionStorage.setItem(STORE.view, name);
  for (const [view, selector] of Object.entries(VIEWS)) $(selector).hidden = view !== name;
  for (const button of document.querySelectorAll("#views button")) {
    button.setAttribute("aria-current", button.dataset.view === name ? "page" : "false");
  }
  if (name === "notes") await notes.load();
  if (name === "tasks") await tasks.load();
  if (name === "memory") await memory.load();
  if (name === "modes") await modes.load();
}

// ---- sessions, chain and messages --------------------------------------------------

function setKey(key) {
  state.key = key;
  if (key) sessionStorage.setItem(STORE.key, key);
  else sessionStorage.removeItem(STORE.key);
  $("#conversation-title").textContent = key || "New conversation";
  renderSessions();
}

function renderSessions() {
  const shown = filterSessions(state.sessions, $("#session-search").value);
  renderSessionList($("#session-list"), shown, state.key, openKey);
}

function renderChainList() {
  renderChain($("#chain-list"), state.chain, state.shown, { onShow: showSegment, onRevert: revert });
}

async function loadSessions() {
  state.sessions = await loadAllSessions(api);
  renderSessions();
}

async function loadChain() {
  state.chain = null;
  if (state.key) {
    try {
      state.chain = await api.get(`/v1/sessions/${enc(state.key)}`);
    } catch (error) {
      if (error.code !== "session_not_found") throw error;
    }
  }
  renderChainList();
}

/** "quota: 3 of 30 requests this minute · 1,200 of 200,000 tokens today" (GET
 * /v1/me/quotas), only the quotas that apply; hidden when none does. */
async function showQuota() {
  const box = $("#quota");
  const { quotas } = await api.get("/v1/me/quotas");
  const parts = [];
  const shown = (n) => Number(n).toLocaleString("en");
  const minute = quotas.requests_per_minute;
  if (minute && minute.limit !== null) {
    parts.push(`${shown(minute.used)} of ${shown(minute.limit)} requests this minute`);
  }
  const day = quotas.tokens_per_day;
  if (day && day.limit !== null) parts.push(`${shown(day.used)} of ${shown(day.limit)} tokens today`);
  box.textContent = parts.length ? `quota: ${parts.join(" · ")}` : "";
  box.hidden = !parts.length;
}

async function refresh() {
  try {
    await Promise.all([loadSessions(), loadChain(), showQuota()]);
  } catch (error) {
    transcript.append(errorEl(error));
  }
}

function showError(error) {
  transcript.append(errorEl(error));
  scrollToEnd(transcript, { always: true });
}

/** The latest segment's newest page, without the messages of `skipTurn`. */
async function showLatest(skipTurn = null) {
  state.shown = null;
  state.later = null;
  $("#segment-banner").hidden = true;
  $("#load-later").hidden = true;
  clear(transcript);
  const latest = state.chain?.latest;
  state.earliest = 0;
  state.compaction = null;
  if (latest) {
    const after = tailStart(latest.message_count);
    const page = await loadMessages(api, state.key, latest.session_id, after);
    state.earliest = page.messages.length ? page.messages[0].seq - 1 : 0;
    transcript.append(...messageNodes(page.messages, skipTurn, { fetchAudio: playAudio }));
    state.compaction = await inForce(api, state.key).catch(() => null);
    showDivider();
  }
  $("#load-earlier").hidden = state.earliest <= 0;
  renderChainList();
  scrollToEnd(transcript, { always: true });
}

/** The divider where the latest segment's earlier messages were summarised. */
function showDivider() {
  placeDivider(transcript, state.compaction, {
    api,
    key: state.key,
    announce,
    onUndone: () => showLatest(),
  });
}

async function showSegment(segment) {
  if (segment.status === "latest") {
    await showLatest();
    return;
  }
  state.shown = segment.session_id;
  state.earliest = 0;
  const index = state.chain.segments.indexOf(segment) + 1;
  $("#segment-banner-text").textContent = `Segment ${index} (archived, read-only).`;
  $("#segment-banner").hidden = false;
  $("#load-earlier").hidden = true;
  clear(transcript);
  await loadLater(segment.session_id, 0);
  renderChainList();
  $("#back-to-latest").focus();
}

async function loadLater(sessionId, after) {
  const page = await loadMessages(api, state.key, sessionId, after);
  transcript.append(...messageNodes(page.messages, null, { fetchAudio: playAudio }));
  state.later = page.messages.length === PAGE ? page.next_after : null;
  $("#load-later").hidden = state.later === null;
}

async function loadEarlier() {
  const sessionId = state.chain.latest.session_id;
  const after = Math.max(0, state.earliest - PAGE);
  const page = await loadMessages(api, state.key, sessionId, after, state.earliest - after);
  transcript.prepend(...messageNodes(page.messages, null, { fetchAudio: playAudio }));
  showDivider();
  state.earliest = after;
  $("#load-earlier").hidden = state.earliest <= 0;
}

async function openKey(key) {
  setKey(key);
  try {
    await loadChain();
    await showLatest();
  } catch (error) {
    showError(error);
  }
  $("#message").focus();
}

/** A message of a key shown in its conversation, scrolled to and marked: where a memory
 *  item came from (the Memory view's links). Pages through the segment until the message
 *  is on screen; without it (erased, or no message named) the key alone is opened. */
async function openMessage(key, sessionId, messageId) {
  await showView("chat");
  setKey(key);
  try {
    await loadChain();
    const segment = state.chain?.segments.find((each) => each.session_id === sessionId);
    if (segment && segment.status !== "latest") await showSegment(segment);
    else await showLatest();
    const node = messageId ? await findMessage(messageId) : null;
    if (!node) {
      announce(`Opened ${key}.`);
      return;
    }
    for (const old of transcript.querySelectorAll(".highlight")) old.classList.remove("highlight");
    node.classList.add("highlight");
    node.tabIndex = -1;
    node.scrollIntoView({ block: "center" });
    node.focus({ preventScroll: true });
    announce("Showing the message this memory came from.");
  } catch (error) {
    showError(error);
  }
}

async function findMessage(messageId) {
  const selector = `[data-message-id="${CSS.escape(messageId)}"]`;
  for (let page = 0; page < 100; page += 1) {
    const node = transcript.querySelector(selector);
    if (node) return node;
    if (state.shown) {
      if (state.later === null) return null;
      await loadLater(state.shown, state.later);
    } else {
      if (state.earliest <= 0) return null;
      await loadEarlier();
    }
  }
  return null;
}

async function startChat() {
  const pending = loadPending();
  if (pending?.key) setKey(pending.key);
  else setKey(state.key);
  await refresh();
  if (!state.key && state.sessions.length) {
    // A fresh sign-in continues where the user was most recently active.
    setKey(filterSessions(state.sessions, "")[0].key);
    await loadChain().catch(showError);
  }
  try {
    await showLatest(pending?.turnId);
  } catch (error) {
    showError(error);
  }
  if (pending) chat.resume(pending);
}

// ---- actions ----------------------------------------------------------------------

async function send() {
  const box = $("#message");
  const content = box.value;
  if (!content.trim()) return;
  if (chat.busy) {
    announce("A reply is still streaming.");
    return;
  }
  if (state.shown) await showLatest();
  const body = { content };
  if ($("#speak").checked) body.speak = true;
  if (state.recall) body.recall = state.recall;
  setRecall(null);
  box.value = "";
  await chat.send(state.key, body);
}

async function newSegment() {
  if (!state.key) {
    $("#message").value = "/new";
    await send();
    return;
  }
  try {
    const answer = await api.post(`/v1/sessions/${enc(state.key)}/new`);
    const view = new TurnView(hooks);
    view.node.replaceChildren(view.body);
    view.apply("rotation", answer.rotation);
    transcript.append(view.node);
    announce("New segment started.");
    await refresh();
  } catch (error) {
    showError(error);
  }
}

async function revert() {
  try {
    await api.post(`/v1/sessions/${enc(state.key)}/revert`);
    announce("Rotation reverted.");
    await refresh();
    await showLatest();
  } catch (error) {
    showError(error);
  }
}

function setRecall(recall) {
  state.recall = recall;
  $("#recall-chip").hidden = !recall;
  const where = recall?.scope === "all" ? " from all your conversations" : "";
  $("#recall-chip-text").textContent = recall ? `Your next message recalls “${recall.query}”${where}.` : "";
}

function requireKey(action) {
  return () => {
    if (!state.key) {
      showError({ code: "no_key", message: "open or start a key first" });
      return;
    }
    action(state.key);
  };
}

// ---- wiring -----------------------------------------------------------------------

$("#signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("#api-key").value.trim();
  if (key) signIn(key);
});
$("#sign-out").addEventListener("click", signOut);
for (const button of document.querySelectorAll("#views button")) {
  button.addEventListener("click", () => showView(button.dataset.view));
}
$("#session-search").addEventListener("input", renderSessions);
$("#open-key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("#open-key").value.trim();
  if (key) openKey(key);
  $("#open-key").value = "";
});
$("#composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
$("#message").addEventListener("keydown", (event) => {
  // Enter sends; Shift+Enter is a new line; Ctrl/Cmd+Enter sends too.
  if (event.key !== "Enter" || event.isComposing || event.shiftKey || event.altKey) return;
  event.preventDefault();
  send();
});
document.addEventListener("keydown", (event) => {
  if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k" && state.apiKey) {
    event.preventDefault();
    showView("chat").then(() => $("#session-search").focus());
  }
});
$("#new-segment").addEventListener("click", newSegment);
$("#back-to-latest").addEventListener("click", () => showLatest().then(() => $("#message").focus()));
$("#load-earlier").addEventListener("click", () => loadEarlier().catch(showError));
$("#load-later").addEventListener("click", () => loadLater(state.shown, state.later).catch(showError));
/** "segment 2" for a session id of the open chain (its position, oldest first). */
function segmentName(sessionId) {
  const index = state.chain?.segments.findIndex((segment) => segment.session_id === sessionId) ?? -1;
  return index >= 0 ? `segment ${index + 1}` : `segment ${sessionId}`;
}

$("#show-context").addEventListener(
  "click",
  requireKey((key) => showContext(api, key, { recall: state.recall, segmentName })),
);
$("#show-recall").addEventListener("click", requireKey((key) => showRecall(api, key, setRecall, segmentName)));
$("#recall-clear").addEventListener("click", () => setRecall(null));
$("#show-overrides").addEventListener(
  "click",
  requireKey((key) =>
    showOverrides(api, key, state.chain?.overrides, (overrides) => {
      if (state.chain) state.chain.overrides = overrides;
      announce("Settings saved.");
    }),
  ),
);
$("#export-chain").addEventListener("click", requireKey((key) => exportChain(api, key).catch(showError)));
$("#import-chain").addEventListener("click", () =>
  showImport(api, async (key) => {
    await loadSessions();
    await openKey(key);
  }),
);

// The page is interactive from here: every module above has loaded and run.
$("#api-key").disabled = false;
$("#sign-in").disabled = false;
document.documentElement.dataset.ready = "true";
performance.mark("sessiongate:interactive"); // what bench/page_load.py reads
if (state.apiKey) signIn(state.apiKey, { quiet: true });
else $("#api-key").focus();
