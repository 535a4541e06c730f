// The caller's session keys (searchable), a key's chain of segments as a timeline, and a
// segment's messages page by page.

import { enc } from "./api.js";
import { clear, el, timeEl } from "./dom.js";
import { learnSpokenReplies } from "./speech.js";
import { reasonLabel, storedMessage } from "./turn.js";

export const PAGE = 50;
/** Keys per request when the page reads the whole key listing (the API's largest page). */
export const KEY_PAGE = 1000;

/** Every key of the caller: GET /v1/sessions page after page, following next_cursor
 *  until the last page (the listing is paginated; one request shows only the first). */
export async function loadAllSessions(api) {
  const sessions = [];
  let cursor = null;
  do {
    const query = cursor ? `&cursor=${enc(cursor)}` : "";
    const answer = await api.get(`/v1/sessions?limit=${KEY_PAGE}${query}`);
    sessions.push(...answer.sessions);
    cursor = answer.next_cursor ?? null;
  } while (cursor);
  return sessions;
}

/** Keys whose name or title contains every word of the query, newest activity first. */
export function filterSessions(sessions, query) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return sessions
    .filter((s) => {
      const text = `${s.key} ${s.title || ""}`.toLowerCase();
      return words.every((word) => text.includes(word));
    })
    .sort((a, b) => String(b.last_activity_at).localeCompare(String(a.last_activity_at)));
}

export function renderSessionList(list, sessions, current, onOpen) {
  clear(list);
  if (sessions.length === 0) {
    list.append(el("li", { class: "muted" }, "No keys yet: send a message to start one."));
    return;
  }
  for (const session of sessions) {
    const selected = session.key === current;
    list.append(
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "session",
            "aria-current": selected ? "true" : false,
            onclick: () => onOpen(session.key),
          },
          // The conversation's title (its first message, or the one set) above its key.
          session.title ? el("span", { class: "title" }, session.title) : null,
          el("span", { class: "key" }, session.key),
          el(
            "span",
            { class: "muted small stats" },
            `${session.message_count} messages · ${session.segment_count} segments · `,
            timeEl(session.last_activity_at),
          ),
        ),
      ),
    );
  }
}

/** The chain, oldest segment first, each with the rotation that began it. */
export function renderChain(list, chain, shownSegment, { onShow, onRevert }) {
  clear(list);
  if (!chain) {
    list.append(el("li", { class: "muted" }, "Open a key to see its segments."));
    return;
  }
  const began = new Map(chain.rotations.map((rotation) => [rotation.to, rotation]));
  const position = new Map(chain.segments.map((segment, index) => [segment.session_id, index + 1]));
  chain.segments.forEach((segment, index) => {
    const rotation = began.get(segment.session_id);
    // `first` (null from gateways before it) for the segment no rotation made.
    const reason = rotation?.reason || (segment.created_reason === "first" ? null : segment.created_reason);
    const latest = segment.status === "latest";
    const canRevert = latest && reason === "semantic";
    list.append(
      el(
        "li",
        { class: `segment ${latest ? "latest" : "archived"}`, dataset: { reason: reason || "first" } },
        el(
          "div",
          { class: "segment-head" },
          el("strong", {}, `Segment ${index + 1}`),
          " ",
          el("span", { class: "badge" }, latest ? "latest" : "archived"),
        ),
        el(
          "div",
          { class: "small" },
          index === 0 && !reason ? "Started" : `Rotation: ${reasonLabel(reason)}`,
          " · ",
          timeEl(rotation?.at || segment.created_at),
        ),
        continuation(segment, position),
        el("div", { class: "muted small" }, `${segment.message_count} messages`),
        el(
          "button",
          {
            type: "button",
            class: "quiet",
            "aria-pressed": shownSegment === segment.session_id ? "true" : "false",
            onclick: () => onShow(segment),
          },
          `Show segment ${index + 1}`,
        ),
        canRevert
          ? el("button", { type: "button", class: "quiet", onclick: onRevert }, "Revert")
          : null,
      ),
    );
  });
}

/** "continues segments 1 and 2" for a segment that links predecessors (a revert). */
function continuation(segment, position) {
  const parents = (segment.parent_ids || []).map((id) => position.get(id)).filter(Boolean);
  if (parents.length < 2) return null;
  const names = parents.sort((a, b) => a - b);
  const listed = `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
  return el("div", { class: "small" }, `continues segments ${listed}`);
}

/** Messages of a segment from `after` (exclusive), as nodes, with the next cursor. */
export async function loadMessages(api, key, sessionId, after, limit = PAGE) {
  const page = await api.get(
    `/v1/sessions/${enc(key)}/segments/${enc(sessionId)}/messages?after=${after}&limit=${limit}`,
  );
  // Spoken replies get their players back: which turns were spoken, from the gateway.
  if (page.messages.some((message) => message.role === "assistant")) {
    await learnSpokenReplies(api, key);
  }
  return page;
}

/** The newest page of a segment: its last PAGE messages (seq counts from 1). */
export function tailStart(messageCount) {
  return Math.max(0, messageCount - PAGE);
}

export function messageNodes(messages, skipTurn = null, options = {}) {
  return messages
    .filter((message) => !skipTurn || message.metadata?.turn_id !== skipTurn)
    .map((message) => storedMessage(message, options));
}
