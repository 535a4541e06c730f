// A spoken reply on screen: the `audio_part` events played one after another as they
// arrive (the first sentence is heard while the rest is still being synthesised), then the
// whole reply (the `audio` event) offered in the same player for replay, not played again.
// Audio is fetched with the key (a header) and played from a blob: URL.
//
// A stored reply gets its player back from the key's audio artifacts, which the gateway
// lists by turn (`GET /v1/artifacts?key=&media_type=audio/wav`), in any tab or device; the
// tab also remembers the spoken replies it saw itself, for a key read before its listing.

import { el, errorEl } from "./dom.js";

const SPOKEN = "sg.spoken";
const REMEMBERED = 50; // the newest spoken replies a tab keeps a link to

function readSpoken() {
  try {
    const found = JSON.parse(sessionStorage.getItem(SPOKEN) || "[]");
    return Array.isArray(found) ? found : [];
  } catch {
    return [];
  }
}

/** Keep the link from a turn to its whole-reply audio for this tab's later pages. */
export function rememberSpoken(turnId, audio) {
  if (!turnId || !audio?.url) return;
  const kept = readSpoken().filter((entry) => entry.turnId !== turnId);
  kept.push({ turnId, url: audio.url, duration_ms: audio.duration_ms ?? null });
  sessionStorage.setItem(SPOKEN, JSON.stringify(kept.slice(-REMEMBERED)));
}

/** turn id → its whole-reply audio, from the gateway's listing of a key's artifacts. */
const listed = new Map();

/** Read which of `key`'s turns were spoken. Newest first; a turn's whole reply is saved
 *  after its parts, so the first artifact listed for a turn is the whole reply. */
export async function learnSpokenReplies(api, key) {
  let listing;
  try {
    listing = await api.get(
      `/v1/artifacts?key=${encodeURIComponent(key)}&media_type=audio%2Fwav&limit=500`,
    );
  } catch {
    return; // the transcript still shows; only the players are missing
  }
  const seen = new Set();
  for (const artifact of listing.artifacts || []) {
    if (!artifact.turn_id || seen.has(artifact.turn_id)) continue;
    seen.add(artifact.turn_id);
    listed.set(artifact.turn_id, { turnId: artifact.turn_id, url: artifact.url });
  }
}

/** The whole-reply audio of `turnId` (listed by the gateway or seen by this tab), or null. */
export function spokenAudio(turnId) {
  return listed.get(turnId) || readSpoken().find((entry) => entry.turnId === turnId) || null;
}

export class SpeechPlayer {
  /** `fetchAudio(url)` resolves to a blob: URL. A `quiet` player (a turn shown again after
   *  a reload) plays nothing by itself and skips the parts: the whole reply is enough. */
  constructor(fetchAudio, { quiet = false } = {}) {
    this.fetchAudio = fetchAudio;
    this.quiet = quiet;
    this.player = el("audio", { controls: true, preload: "metadata", "aria-label": "Spoken reply" });
    this.node = el("div", { class: "audio" }, this.player);
    this.ready = new Map(); // part index → blob: URL, fetched and waiting for its turn
    this.announced = 0; // audio_part events seen
    this.next = 0; // the part to play next
    this.playing = false;
    this.blocked = false; // the browser refused to play without a gesture: the user will
    this.whole = null; // blob: URL of the whole reply once fetched
    this.wholeShown = false;
    this.autoplayWhole = false;
    this.player.addEventListener("ended", () => {
      this.playing = false;
      this.advance();
    });
  }

  fail(error) {
    this.node.append(errorEl(error));
  }

  /** An `audio_part` event: fetched at once, played in order. */
  addPart(data) {
    if (this.quiet) return;
    this.announced += 1;
    this.fetchAudio(data.url).then(
      (src) => {
        this.ready.set(data.part, src);
        this.advance();
      },
      (error) => this.fail(error),
    );
  }

  /** The `audio` event: the whole reply. Played only when no part came (nothing was
   *  heard yet) and `autoplay` is asked for; else just loaded for replay. */
  setWhole(data, { autoplay = false } = {}) {
    this.autoplayWhole = autoplay && !this.quiet && this.announced === 0;
    this.fetchAudio(data.url).then(
      (src) => {
        this.whole = src;
        this.advance();
      },
      (error) => this.fail(error),
    );
  }

  advance() {
    if (this.playing) return;
    const part = this.ready.get(this.next);
    if (part !== undefined && !this.blocked) {
      this.ready.delete(this.next);
      this.player.dataset.part = String(this.next);
      this.next += 1;
      this.show(part, true);
      return;
    }
    const partsDone = this.blocked || this.next >= this.announced;
    if (this.whole && !this.wholeShown && partsDone) {
      this.wholeShown = true;
      delete this.player.dataset.part;
      this.player.dataset.whole = "true";
      this.show(this.whole, this.autoplayWhole && !this.blocked);
    }
  }

  show(src, play) {
    const previous = this.player.src;
    this.player.src = src;
    if (previous.startsWith("blob:") && previous !== this.whole) URL.revokeObjectURL(previous);
    if (!play) return;
    this.playing = true;
    this.player.play().catch(() => {
      // No autoplay here (no gesture, or a policy): the controls are there to press.
      this.playing = false;
      this.blocked = true;
      this.advance();
    });
  }
}
