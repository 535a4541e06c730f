// Sending a turn and reading its stream, and picking a turn up again after a reload.
//
// While a turn streams, sessionStorage holds what is needed to finish it in a new page:
// {key, path, body, idem, turnId, lastEventId, events}. After a reload the page shows the
// events it had, then asks for the rest: GET /v1/turns/{id}/events with Last-Event-ID;
// if the gateway no longer has the turn (404), the same POST again with the same
// Idempotency-Key (which joins the running turn or replays the finished one); if that
// fails too, the segment's stored messages are what remains.

import { ApiError, enc } from "./api.js";
import { el, errorEl, scrollToEnd } from "./dom.js";
import { readEvents, seqOf } from "./sse.js";
import { TurnView } from "./turn.js";

const PENDING = "sg.pending";
const SAVE_EVERY_MS = 150;

export function loadPending() {
  try {
    return JSON.parse(sessionStorage.getItem(PENDING) || "null");
  } catch {
    return null;
  }
}

function newIdempotencyKey() {
  return crypto.randomUUID();
}

/** Stored events stay small: consecutive tokens are kept as one. */
export function recordEvent(events, type, data) {
  if (type === "start") return [{ type, data }];
  const last = events[events.length - 1];
  if (type === "token" && last?.type === "token") {
    last.data = { ...last.data, content: (last.data.content || "") + (data.content || "") };
    return events;
  }
  events.push({ type, data });
  return events;
}

export function createChat({ api, transcript, announce, hooks, onTurnDone }) {
  let active = null; // {pending, view}
  let savedAt = 0;
  let leaving = false; // the page is going away: its aborted stream is not the turn's end

  function save(force = false) {
    if (!active) return;
    const now = performance.now();
    if (!force && now - savedAt < SAVE_EVERY_MS) return;
    savedAt = now;
    sessionStorage.setItem(PENDING, JSON.stringify(active.pending));
  }
  // A reload mid-turn: keep every event seen so far for the next page to resume from.
  window.addEventListener("pagehide", () => {
    save(true);
    leaving = true;
  });
  window.addEventListener("pageshow", () => {
    leaving = false; // back from the back-forward cache
  });

  function finish(outcome) {
    if (!active || leaving) return;
    const { view, pending } = active;
    active = null;
    sessionStorage.removeItem(PENDING);
    view.finish();
    if (outcome === "end") announce(`Reply finished: ${view.text.slice(0, 200)}`);
    else if (outcome === "error") announce("The turn ended with an error");
    onTurnDone(pending.key);
  }

  /** Reads one response's events into the active turn. Resolves to "end", "error", or
   *  "cut" (the stream stopped before the turn ended). */
  async function consume(response) {
    const { pending, view } = active;
    let outcome = "cut";
    for await (const event of readEvents(response.body)) {
      const { type, data } = event;
      if (type === "start") {
        pending.turnId = data.turn_id || pending.turnId;
        if (data.session_key && !pending.key) pending.key = data.session_key;
        pending.seq = 1;
      } else {
        pending.seq = (pending.seq || 0) + 1;
      }
      if (event.id) pending.seq = seqOf(event.id) ?? pending.seq;
      pending.lastEventId = event.id || (pending.turnId ? `${pending.turnId}.${pending.seq}` : null);
      pending.events = recordEvent(pending.events, type, data);
      view.apply(type, data);
      scrollToEnd(transcript);
      if (type === "start") hooks.onStart?.(data);
      if (type === "end" || type === "error") {
        outcome = type; // an `audio` event may still follow `end`
        pending.done = true;
      }
      save(type === "start" || type === "end");
    }
    return outcome;
  }

  async function post(pending, resuming) {
    const headers = { "Idempotency-Key": pending.idem, Accept: "text/event-stream" };
    if (resuming && pending.lastEventId) headers["Last-Event-ID"] = pending.lastEventId;
    return api.raw("POST", pending.path, { body: pending.body, headers });
  }

  async function run(pending, resuming) {
    const view = active.view;
    let outcome = "cut";
    try {
      if (resuming && pending.turnId) {
        try {
          const response = await api.raw("GET", `/v1/turns/${enc(pending.turnId)}/events`, {
            headers: { "Last-Event-ID": pending.lastEventId || `${pending.turnId}.0` },
          });
          outcome = await consume(response);
        } catch (error) {
          if (!(error instanceof ApiError) || error.status !== 404) throw error;
          outcome = await consume(await post(pending, true));
        }
      } else {
        outcome = await consume(await post(pending, resuming));
      }
      if (outcome === "cut" && !pending.done) {
        // The connection dropped: the gateway may still be running the turn.
        outcome = await consume(await post(pending, true));
      }
    } catch (error) {
      if (error.name === "AbortError" || leaving) return;
      if (resuming) {
        view.add(el("p", { class: "note warn" }, "The turn could not be resumed; showing what was kept."));
        finish("error");
        hooks.reloadMessages();
        return;
      }
      view.add(errorEl(error));
      outcome = "error";
    }
    if (outcome === "cut" && !pending.done) {
      view.add(errorEl({ code: "stream_cut", message: "the stream ended before the reply did" }));
      outcome = "error";
    }
    finish(pending.done && outcome === "cut" ? "end" : outcome);
  }

  return {
    get busy() {
      return active !== null;
    },

    /** Starts a turn: on `key`, or a routed turn (`/v1/chat`) when key is null. */
    send(key, body) {
      const path = key ? `/v1/sessions/${enc(key)}/messages` : "/v1/chat";
      const pending = {
        key,
        path,
        body: { ...body, stream: true },
        idem: newIdempotencyKey(),
        turnId: null,
        lastEventId: null,
        seq: 0,
        events: [],
        done: false,
      };
      const view = new TurnView(hooks);
      view.setUser(body.content);
      transcript.append(view.node);
      scrollToEnd(transcript, { always: true });
      active = { pending, view };
      save(true);
      return run(pending, false);
    },

    /** Picks up the turn a previous page left streaming (if it was on `key`). */
    resume(pending) {
      const view = new TurnView(hooks);
      view.replayed = true;
      view.setUser(pending.body.content);
      for (const { type, data } of pending.events || []) view.apply(type, data);
      transcript.append(view.node);
      active = { pending, view };
      return run(pending, true);
    },

    forget() {
      active = null;
      sessionStorage.removeItem(PENDING);
    },
  };
}
