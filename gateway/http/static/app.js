// The chat page: the conversation, the composer, the key, the model and the Web switch.
// Rendering is in render.js (nothing is ever inserted as HTML), the API in stream.js,
// what the browser keeps in store.js.

import { el, eventLine, externalLink, hostOf, renderMarkdown, webNote, workingText } from "./render.js";
import { store } from "./store.js";
import { listModels, streamTurn } from "./stream.js";

const $ = (id) => document.getElementById(id);
const ui = {
  main: $("main"),
  messages: $("messages"),
  empty: $("empty"),
  model: $("model"),
  web: $("web"),
  prompt: $("prompt"),
  composer: $("composer"),
  send: $("send"),
  stop: $("stop"),
  notice: $("notice"),
  status: $("status"),
  newChat: $("new-chat"),
  forgetKey: $("forget-key"),
  keyDialog: $("key-dialog"),
  keyForm: $("key-form"),
  keyInput: $("key-input"),
  keyError: $("key-error"),
};

const MAX_EVENTS = 300;

const state = {
  key: store.key(),
  keyless: false, // the gateway has no keys (loopback only): never ask for one
  messages: [],
  views: new Map(),
  busy: null, // {controller, msg} while an answer streams
  saveTimer: 0,
};

// --- Messages ------------------------------------------------------------------------

let nextId = Date.now();
const newId = () => `m${(nextId++).toString(36)}`;

function userMessage(content) {
  return { id: newId(), role: "user", content };
}

function answerMessage(model, web) {
  return {
    id: newId(), role: "assistant", model, web, content: "", reasoning: "", events: [],
    sources: null, citations: null, status: "streaming", error: "", phase: "", working: [],
  };
}

function sourcesFrom(event) {
  const list = Array.isArray(event.sources) ? event.sources : [];
  return list
    .filter((s) => s && Number.isInteger(s.n))
    .map((s) => ({
      n: s.n, url: String(s.url || ""), title: String(s.title || ""),
      // Read by the model, or known to it only by the search result; null: not said.
      read: typeof s.read === "boolean" ? s.read : null,
    }));
}

function numbers(list) {
  return Array.isArray(list) ? list.filter((n) => Number.isInteger(n)) : [];
}

/** The messages sent for an answer: what came before it, each question once answered. */
function historyFor(msg) {
  const before = state.messages.slice(0, state.messages.indexOf(msg));
  const out = [];
  before.forEach((m, i) => {
    if (m.role === "user") {
      const next = before[i + 1];
      const answered = next && next.role === "assistant" && next.content.trim();
      // A question whose answer failed is left out, so roles still alternate.
      if (answered || i === before.length - 1) out.push({ role: "user", content: m.content });
    } else if (m.content.trim()) {
      out.push({ role: "assistant", content: m.content });
    }
  });
  return out;
}

// --- Views ---------------------------------------------------------------------------

class UserView {
  constructor(msg) {
    this.node = el("li", null, "msg user");
    this.node.append(el("h2", "You", "sr-only"), el("div", msg.content, "bubble"));
  }

  update() {}
}

class AnswerView {
  constructor(msg) {
    this.msg = msg;
    this.node = el("li", null, "msg assistant");
    this.node.id = msg.id;
    this.node.append(el("h2", "Answer", "sr-only"));
    this.reasoning = el("details", null, "reasoning");
    this.reasoning.append(el("summary", "Reasoning"), el("div", null, "reasoning-text"));
    this.events = el("ul", null, "events");
    this.events.setAttribute("aria-label", "What the tools did");
    this.progress = el("p", null, "progress");
    // Web on, and no search that found anything: said before the answer is read.
    this.webNote = el("p", null, "web-note");
    this.answer = el("div", null, "answer markdown");
    this.error = el("p", null, "error");
    this.error.setAttribute("role", "alert");
    this.note = el("p", null, "note");
    this.sources = el("section", null, "sources");
    this.sources.setAttribute("aria-label", "Sources");
    this.sources.hidden = true;
    this.actions = el("div", null, "actions");
    this.copyButton = el("button", "Copy", "quiet small");
    this.copyButton.type = "button";
    this.copyButton.setAttribute("aria-label", "Copy this answer");
    this.retryButton = el("button", "Retry", "quiet small");
    this.retryButton.type = "button";
    this.retryButton.setAttribute("aria-label", "Ask for this answer again");
    this.copyButton.addEventListener("click", () => copyAnswer(this.msg, this.copyButton));
    this.retryButton.addEventListener("click", () => retry(this.msg));
    this.actions.append(this.copyButton, this.retryButton);
    this.node.append(
      this.reasoning, this.events, this.progress, this.webNote, this.answer, this.error, this.note,
      this.sources, this.actions,
    );
    this.shown = { events: 0, content: null, sources: null, citations: null, reasoning: null };
    this.frame = 0;
  }

  /** Re-render what changed, at most once per frame. */
  update() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  render() {
    const msg = this.msg;
    const follow = nearBottom();
    this.node.setAttribute("aria-busy", msg.status === "streaming" ? "true" : "false");
    if (msg.reasoning !== this.shown.reasoning) {
      this.shown.reasoning = msg.reasoning;
      this.reasoning.hidden = !msg.reasoning;
      this.reasoning.lastChild.textContent = msg.reasoning;
    }
    if (msg.events.length < this.shown.events) {
      this.events.replaceChildren();
      this.shown.events = 0;
    }
    for (const event of msg.events.slice(this.shown.events)) {
      const line = eventLine(event);
      if (line) this.events.append(line);
    }
    this.shown.events = msg.events.length;
    this.events.hidden = this.events.childElementCount === 0;
    const progress = progressText(msg);
    this.progress.textContent = progress;
    this.progress.hidden = !progress;
    const finished = msg.web && msg.status !== "streaming" && msg.content.trim() !== "";
    this.webNote.textContent = finished ? webNote(msg.events, msg.sources) : "";
    this.webNote.hidden = !this.webNote.textContent;
    const citesChanged = msg.sources !== this.shown.sources || msg.citations !== this.shown.citations;
    if (msg.content !== this.shown.content || citesChanged) {
      this.shown.content = msg.content;
      this.answer.replaceChildren(renderMarkdown(msg.content, this.cites()));
    }
    if (citesChanged || msg.status !== "streaming") {
      this.shown.sources = msg.sources;
      this.shown.citations = msg.citations;
      this.renderSources();
    }
    this.error.textContent = msg.error;
    this.error.hidden = !msg.error;
    this.note.textContent = NOTES[msg.status] || "";
    this.note.hidden = !this.note.textContent;
    this.actions.hidden = msg.status === "streaming";
    this.copyButton.hidden = !msg.content;
    this.retryButton.hidden = state.messages[state.messages.length - 1] !== msg;
    if (follow) scrollToEnd();
  }

  sourceById() {
    return new Map((this.msg.sources || []).map((s) => [s.n, s]));
  }

  cites() {
    const byN = this.sourceById();
    const unknown = new Set(numbers(this.msg.citations && this.msg.citations.unknown));
    return {
      unknown,
      sourceId: (n) => (byN.has(n) && !unknown.has(n) ? `${this.msg.id}-src-${n}` : null),
      sourceTitle: (n) => (byN.get(n) ? byN.get(n).title || byN.get(n).url : ""),
    };
  }

  renderSources() {
    const sources = this.msg.sources || [];
    this.sources.replaceChildren();
    this.sources.hidden = sources.length === 0;
    if (!sources.length) return;
    const cited = citedNumbers(this.msg);
    const main = sources.filter((s) => cited.has(s.n));
    const rest = sources.filter((s) => !cited.has(s.n));
    if (main.length) {
      this.sources.append(el("h3", "Sources"), this.sourceList(main));
    }
    if (rest.length) {
      const more = el("details", null, "more-sources");
      const label = main.length ? `Other sources found (${rest.length})` : `Sources found (${rest.length})`;
      more.append(el("summary", label), this.sourceList(rest));
      this.sources.append(more);
    }
  }

  sourceList(sources) {
    const list = el("ol");
    for (const source of sources) {
      const item = el("li");
      item.value = source.n;
      item.id = `${this.msg.id}-src-${source.n}`;
      const host = hostOf(source.url);
      item.append(externalLink(source.url, source.title.trim() || host || source.url));
      if (host) item.append(el("span", ` ${host}`, "host"));
      if (source.read === true || source.read === false) {
        const how = el("span", source.read ? " · read" : " · snippet only", source.read ? "how read" : "how");
        how.title = source.read
          ? "The model read this page."
          : "The model saw only this search result's title and snippet, not the page.";
        item.append(how);
      }
      list.append(item);
    }
    return list;
  }
}

const NOTES = {
  stopped: "Stopped.",
  interrupted: "This answer was interrupted when the page was reloaded.",
};

/** The numbers the answer cites (from the `citations` event, else from its text). */
function citedNumbers(msg) {
  if (msg.citations) return new Set(numbers(msg.citations.cited));
  const found = new Set();
  for (const match of msg.content.matchAll(/\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]/g)) {
    for (const part of match[1].split(",")) found.add(Number.parseInt(part.trim(), 10));
  }
  return found;
}

/**
 * The progress line while an answer streams: what the tools do now (the `working`
 * event), else what the model does.
 */
function progressText(msg) {
  if (msg.status !== "streaming") return "";
  const working = workingText(msg.working);
  if (working) return `${working}…`;
  switch (msg.phase) {
    case "writing":
      return "";
    case "answering":
      return "writing the answer…";
    case "thinking":
      return "thinking…";
    default:
      return msg.web ? "thinking…" : "waiting for the model…";
  }
}

function viewFor(msg) {
  let view = state.views.get(msg.id);
  if (!view) {
    view = msg.role === "user" ? new UserView(msg) : new AnswerView(msg);
    state.views.set(msg.id, view);
  }
  return view;
}

function renderAll() {
  ui.messages.replaceChildren();
  state.views.clear();
  for (const msg of state.messages) {
    const view = viewFor(msg);
    ui.messages.append(view.node);
    if (view instanceof AnswerView) view.render();
  }
  ui.empty.hidden = state.messages.length > 0;
}

function append(msg) {
  const view = viewFor(msg);
  ui.messages.append(view.node);
  ui.empty.hidden = true;
  view.update();
}

function nearBottom() {
  const m = ui.main;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 96;
}

function scrollToEnd() {
  ui.main.scrollTop = ui.main.scrollHeight;
}

// --- Saving --------------------------------------------------------------------------

function save() {
  clearTimeout(state.saveTimer);
  state.saveTimer = 0;
  if (!store.saveMessages(state.messages)) {
    notice("This conversation is too large to keep in this browser; it will be lost on reload.");
  }
}

function saveSoon() {
  if (!state.saveTimer) state.saveTimer = setTimeout(save, 400);
}

// --- Asking --------------------------------------------------------------------------

function announce(text) {
  ui.status.textContent = text;
}

function notice(text) {
  ui.notice.textContent = text;
  ui.notice.hidden = !text;
}

function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
  if (!busy && document.activeElement === ui.stop) ui.prompt.focus();
}

function touch(msg) {
  viewFor(msg).update();
  saveSoon();
}

async function run(msg) {
  const controller = new AbortController();
  state.busy = { controller, msg };
  setBusy(true);
  announce(msg.web ? "Searching…" : "Asking…");
  const handlers = {
    content(text) {
      msg.content += text;
      msg.phase = "writing";
      touch(msg);
    },
    reasoning(text) {
      msg.reasoning += text;
      if (msg.phase !== "writing") msg.phase = "thinking";
      touch(msg);
    },
    event(event) {
      if (event.type === "working") {
        // What the tools do now; none when they are done and the model is asked again.
        msg.working = Array.isArray(event.calls) ? event.calls.slice(0, 20) : [];
        if (msg.phase !== "writing") msg.phase = "thinking";
        announce(progressText(msg));
      } else if (event.type === "sources") {
        msg.sources = sourcesFrom(event);
        if (msg.phase !== "writing") msg.phase = "answering";
      } else if (event.type === "citations") {
        msg.citations = { cited: numbers(event.cited), unknown: numbers(event.unknown) };
      } else if (msg.events.length < MAX_EVENTS) {
        msg.events.push(event);
      }
      touch(msg);
    },
  };
  try {
    const result = await streamTurn(
      { key: state.key, model: msg.model, messages: historyFor(msg), web: msg.web, signal: controller.signal },
      handlers,
    );
    if (result.ok) {
      msg.status = "done";
      announce("Answer finished.");
    } else {
      msg.status = "error";
      msg.error = result.message;
      announce(result.message);
      if (result.status === 401) askForKey(result.message);
    }
  } catch (error) {
    msg.status = error.name === "AbortError" ? "stopped" : "error";
    if (msg.status === "error") msg.error = `Something went wrong in the page: ${error.message}`;
    announce(msg.status === "stopped" ? "Stopped." : msg.error);
  } finally {
    msg.working = [];
    state.busy = null;
    setBusy(false);
    state.messages.forEach((m) => m.role === "assistant" && viewFor(m).update());
    save();
  }
}

function send() {
  const text = ui.prompt.value.trim();
  if (!text || state.busy) return;
  if (!state.key && !state.keyless) {
    askForKey("");
    return;
  }
  const model = ui.model.value || store.model();
  if (!model) {
    notice("There is no model to ask yet: the gateway did not list any.");
    loadModels();
    return;
  }
  notice("");
  ui.prompt.value = "";
  const question = userMessage(text);
  const answer = answerMessage(model, ui.web.checked);
  state.messages.push(question, answer);
  append(question);
  append(answer);
  state.messages.forEach((m) => m !== answer && m.role === "assistant" && viewFor(m).update());
  scrollToEnd();
  save();
  run(answer);
}

function stop() {
  if (state.busy) state.busy.controller.abort();
}

function retry(msg) {
  if (state.busy || state.messages[state.messages.length - 1] !== msg) return;
  Object.assign(msg, {
    content: "", reasoning: "", events: [], sources: null, citations: null,
    status: "streaming", error: "", phase: "", working: [],
    model: ui.model.value || msg.model, web: ui.web.checked,
  });
  viewFor(msg).update();
  run(msg);
}

function newChat() {
  stop();
  state.messages = [];
  renderAll();
  save();
  notice("");
  ui.prompt.focus();
}

async function copyAnswer(msg, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(msg.content);
    ok = true;
  } catch {
    // Not a secure context (plain http to another host): the older way.
    const area = el("textarea");
    area.value = msg.content;
    document.body.append(area);
    area.select();
    ok = document.execCommand("copy");
    area.remove();
  }
  button.textContent = ok ? "Copied" : "Copy failed";
  announce(ok ? "Answer copied." : "The answer could not be copied.");
  setTimeout(() => {
    button.textContent = "Copy";
  }, 1500);
}

// --- Key and models ------------------------------------------------------------------

function askForKey(message) {
  ui.keyError.textContent = message;
  ui.keyError.hidden = !message;
  ui.keyInput.value = "";
  if (!ui.keyDialog.open) ui.keyDialog.showModal();
  ui.keyInput.focus();
}

async function loadModels() {
  const result = await listModels(state.key);
  if (!result.ok) {
    if (result.status === 401) {
      state.keyless = false;
      ui.forgetKey.hidden = false;
      // A first visit is not an error: just ask.
      askForKey(state.key ? result.message : "");
    } else {
      // The gateway checks the key before anything else, so any other answer to a
      // request without one (a 502: the engine is down) says it has no keys.
      if (!state.key && result.status !== 0) markKeyless();
      notice(result.message);
      const saved = store.model();
      if (saved && !ui.model.value) fillModels([saved]);
    }
    return;
  }
  if (!state.key) markKeyless();
  fillModels(result.models);
  if (!result.models.length) notice("The gateway lists no models. Check its engine settings.");
  else notice("");
}

function markKeyless() {
  state.keyless = true;
  ui.forgetKey.hidden = true;
}

function fillModels(models) {
  const saved = store.model();
  ui.model.replaceChildren(...models.map((m) => el("option", m)));
  ui.model.disabled = models.length === 0;
  if (!models.length) return;
  // The one picked last time; the only one there is, whatever was picked before.
  const chosen = models.length > 1 && models.includes(saved) ? saved : models[0];
  ui.model.value = chosen;
  if (chosen !== saved) store.setModel(chosen);
}

function forgetKey() {
  state.key = "";
  store.setKey(null);
  ui.model.replaceChildren(el("option", "no model yet"));
  ui.model.disabled = true;
  askForKey("");
}

// --- Wiring --------------------------------------------------------------------------

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
ui.stop.addEventListener("click", stop);
ui.newChat.addEventListener("click", newChat);
ui.forgetKey.addEventListener("click", forgetKey);
ui.model.addEventListener("change", () => store.setModel(ui.model.value));
ui.web.addEventListener("change", () => store.setWeb(ui.web.checked));
ui.keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const key = ui.keyInput.value.trim();
  if (!key) return;
  state.key = key;
  store.setKey(key);
  ui.keyDialog.close();
  loadModels();
});
ui.keyDialog.addEventListener("close", () => {
  // Chromium gives focus back to the text box without its caret (keys typed next are
  // lost): take the focus again, for real.
  ui.prompt.blur();
  ui.prompt.focus();
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && state.busy && !ui.keyDialog.open) stop();
});
// Another tab forgot the key or cleared the chat: follow it.
window.addEventListener("storage", () => {
  if (!store.key() && state.key) forgetKey();
});

function start() {
  state.messages = store.messages();
  for (const msg of state.messages) {
    if (msg.role === "assistant" && msg.status === "streaming") msg.status = "interrupted";
  }
  renderAll();
  scrollToEnd();
  ui.web.checked = store.web();
  loadModels(); // asks for the key if the gateway wants one
  ui.prompt.focus();
}

start();
