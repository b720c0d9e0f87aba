// The chat API from the page: one streamed turn, and errors in words.
//
// The stream is the OpenAI one (SPEC 4): `data:` lines holding chat.completion.chunk
// objects, `: ...` comment lines as keep-alives, and `data: [DONE]` at the end. Tool
// events ride in the same chunks, in a top-level `thor_event` field.

/** The `data` of each event of a Server-Sent Events body, as strings. */
export async function* sseData(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        let line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          const value = line.slice(5);
          data.push(value.startsWith(" ") ? value.slice(1) : value);
        }
        // Comments (keep-alives) and other fields are ignored.
      }
      if (done) break;
    }
    if (data.length) yield data.join("\n");
  } finally {
    reader.releaseLock();
  }
}

/**
 * What one chunk says: `{content, reasoning, event, error}` (each absent when not there).
 * Unknown fields are ignored; anything malformed is ignored rather than thrown.
 */
export function readChunk(chunk) {
  const out = {};
  if (chunk === null || typeof chunk !== "object") return out;
  if (chunk.error !== undefined) {
    const error = chunk.error;
    out.error = typeof error === "object" && error !== null ? String(error.message || "") : String(error);
    return out;
  }
  if (chunk.thor_event && typeof chunk.thor_event === "object") out.event = chunk.thor_event;
  const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
  const delta = choice && typeof choice.delta === "object" && choice.delta !== null ? choice.delta : {};
  if (typeof delta.content === "string" && delta.content) out.content = delta.content;
  const reasoning = delta.reasoning_content ?? delta.reasoning;
  if (typeof reasoning === "string" && reasoning) out.reasoning = reasoning;
  return out;
}

/** The message of an OpenAI error body (or of whatever came back). */
export async function errorBody(response) {
  try {
    const body = await response.json();
    if (body && body.error) return String(body.error.message || body.error);
  } catch {
    // not JSON
  }
  return "";
}

/** What went wrong, in words a person can act on. */
export function errorWords(status, message, retryAfter) {
  const detail = message ? ` (${message})` : "";
  const wait = retryAfter ? ` Try again in ${retryAfter} s.` : " Try again in a moment.";
  switch (status) {
    case 401:
      return "The gateway refused this access key. Enter the key again.";
    case 404:
      return `This model is not served here${detail}. Pick another model.`;
    case 413:
      return `The conversation is too long for the gateway${detail}. Start a new chat.`;
    case 429:
      return `Too many requests for this key.${wait}`;
    case 502:
      return `The model engine is not answering${detail}. Is it running?`;
    case 503:
      return `The gateway is busy.${wait}`;
    case 504:
      return `The model engine took too long to answer${detail}.`;
    default:
      if (status >= 400 && status < 500) return `The gateway refused the request${detail}.`;
      return `The gateway failed (${status})${detail}.`;
  }
}

/** The Authorization header, or none when there is no key (a gateway without keys). */
function auth(key) {
  return key ? { Authorization: `Bearer ${key}` } : {};
}

export const UNREACHABLE = "The gateway cannot be reached. Check that it is running, then retry.";
export const CUT_SHORT = "The connection closed before the answer was finished. Retry?";

/**
 * Run one streamed turn.
 *
 * @param {object} request {key, model, messages, web, signal}
 * @param {object} on handlers: content(text), reasoning(text), event(obj)
 * @returns {Promise<{ok: true} | {ok: false, status: number, message: string}>}
 *   rejects with the AbortError when the signal aborts
 */
export async function streamTurn(request, on) {
  const body = { model: request.model, messages: request.messages, stream: true };
  if (request.web) body.thor_web_search = true;
  let response;
  try {
    response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { ...auth(request.key), "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal: request.signal,
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return { ok: false, status: 0, message: UNREACHABLE };
  }
  if (!response.ok) {
    const message = await errorBody(response);
    const retry = response.headers.get("Retry-After");
    return { ok: false, status: response.status, message: errorWords(response.status, message, retry) };
  }
  if (!(response.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    // An engine that ignored `stream: true` (pass-through): one JSON body.
    const whole = await response.json().catch(() => null);
    const message = whole && whole.choices && whole.choices[0] && whole.choices[0].message;
    if (message && typeof message.content === "string") on.content(message.content);
    return { ok: true };
  }
  try {
    for await (const data of sseData(response.body)) {
      if (data === "[DONE]") return { ok: true };
      let chunk;
      try {
        chunk = JSON.parse(data);
      } catch {
        continue;
      }
      const part = readChunk(chunk);
      if (part.error !== undefined) {
        return { ok: false, status: 0, message: `The answer was cut short: ${part.error || "the gateway reported an error"}.` };
      }
      if (part.event) on.event(part.event);
      if (part.reasoning) on.reasoning(part.reasoning);
      if (part.content) on.content(part.content);
    }
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return { ok: false, status: 0, message: CUT_SHORT };
  }
  return { ok: false, status: 0, message: CUT_SHORT };
}

/** The models the gateway serves: `{ok, models}` or `{ok: false, status, message}`. */
export async function listModels(key) {
  let response;
  try {
    response = await fetch("/v1/models", {
      headers: auth(key),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    return { ok: false, status: 0, message: UNREACHABLE };
  }
  if (!response.ok) {
    const message = await errorBody(response);
    return { ok: false, status: response.status, message: errorWords(response.status, message, response.headers.get("Retry-After")) };
  }
  const body = await response.json().catch(() => null);
  const data = body && Array.isArray(body.data) ? body.data : [];
  return { ok: true, models: data.map((m) => String(m.id)).filter((id) => id) };
}
