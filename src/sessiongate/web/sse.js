// Server-Sent Events from a fetch body (EventSource cannot send an Authorization header
// or a POST body).

/** Yields {id, type, data} for each event of a text/event-stream body. `id` is the
 *  event's own `id:` field, or null when it has none. */
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let fields = { id: null, type: "message", data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line === "") {
          if (fields.data.length) yield finish(fields);
          fields = { id: null, type: "message", data: [] };
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (name === "data") fields.data.push(value);
          else if (name === "event") fields.type = value;
          else if (name === "id") fields.id = value;
        }
        newline = buffer.indexOf("\n");
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function finish(fields) {
  let data;
  try {
    data = JSON.parse(fields.data.join("\n"));
  } catch {
    data = { type: "error", code: "bad_event", message: "the gateway sent an unreadable event" };
  }
  const type = fields.type !== "message" ? fields.type : data.type || "message";
  return { id: fields.id, type, data };
}

/** The sequence number of an event id `<turn_id>.<seq>`, or null. */
export function seqOf(id) {
  const match = /\.(\d+)$/.exec(id || "");
  return match ? Number(match[1]) : null;
}
