// The public API with the user's key in the Authorization header (never in a URL).

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** An ApiError from a failed response: the gateway's `{"error": {code, message}}` when it
 *  sent one, else the status. */
export async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status
  }
  return new ApiError(response.status, code, message);
}

export function createApi(getKey) {
  function headers(extra = {}) {
    return { Authorization: `Bearer ${getKey()}`, ...extra };
  }

  /** fetch with the key; throws ApiError on a non-2xx answer, returns the Response. */
  async function raw(method, path, { body, headers: extra = {}, signal } = {}) {
    const init = { method, headers: headers(extra), signal, cache: "no-store" };
    if (body !== undefined) {
      if (typeof body === "string" || body instanceof Blob) {
        init.body = body;
      } else {
        init.body = JSON.stringify(body);
        init.headers["Content-Type"] = "application/json";
      }
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "network_error", "the gateway could not be reached");
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async function json(method, path, options) {
    const response = await raw(method, path, options);
    return response.status === 204 ? null : response.json();
  }

  return {
    raw,
    get: (path) => json("GET", path),
    post: (path, body) => json("POST", path, { body }),
    patch: (path, body) => json("PATCH", path, { body }),
    del: (path) => json("DELETE", path),
  };
}

export const enc = encodeURIComponent;
