// Safe rendering: Markdown to DOM nodes, citations, and the tool-event lines.
//
// Nothing here ever assigns HTML. markdown-it (HTML disabled, images disabled) only
// parses; the DOM is built from its tokens with an allowlist of elements, text always
// goes in as text nodes, and the only attributes set are checked ones: an href that is
// an absolute http(s) address, a list's start number, a code block's language class, a
// table cell's alignment class. Model text, page titles and addresses are untrusted.
//
// Security: the rule is that nothing from the model or from pages runs or loads by
// itself; the threat is an answer or a page title carrying markup or a javascript:/data:
// link (or an image beacon carrying the conversation away). Callers may rely on
// renderMarkdown, eventLine and externalLink producing only the elements and attributes
// above. Proven by tests/page/test_render.py (both sides of each rule) and
// tests/page/test_browser.py::test_hostile_answer_is_shown_as_text_and_nothing_runs.

const TAGS = new Set([
  "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "table",
  "thead", "tbody", "tr", "th", "td", "hr", "pre", "code", "em", "strong", "s", "br",
]);

let parser = null;

function markdown() {
  if (parser === null) {
    // A global from the vendored markdown-it.min.js (loaded first, deferred).
    parser = globalThis.markdownit({ html: false, linkify: true, typographer: false });
    // An image would load a remote address by itself: a beacon a page could plant in the
    // answer. Images stay as text.
    parser.disable(["image"]);
    parser.linkify.set({ fuzzyEmail: false });
  }
  return parser;
}

/** The address as an absolute http(s) URL string, or null for anything else. */
export function safeHref(raw) {
  if (typeof raw !== "string" || raw === "") return null;
  let url;
  try {
    url = new URL(raw); // no base: relative and scheme-relative addresses are refused
  } catch {
    return null;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  return url.href;
}

/** The host of an address, for display ("" when it has none). */
export function hostOf(raw) {
  const href = safeHref(raw);
  return href === null ? "" : new URL(href).host;
}

/** Host and path of an address, cut to about 60 characters, for display ("" if none). */
export function shortAddress(raw) {
  const href = safeHref(raw);
  if (href === null) return "";
  const url = new URL(href);
  const text = url.host + (url.pathname === "/" ? "" : url.pathname) + url.search;
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

export function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (className) node.className = className;
  return node;
}

/** A link that opens in a new tab and tells the target nothing; a span if unsafe. */
export function externalLink(raw, text) {
  const href = safeHref(raw);
  if (href === null) return el("span", text, "unsafe-link");
  const a = el("a", text);
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  a.referrerPolicy = "no-referrer";
  return a;
}

const CITATION = /\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]/g;

/**
 * Render Markdown into a fragment.
 *
 * @param {string} source the model's text
 * @param {{sourceId: (n: number) => string|null, sourceTitle: (n: number) => string,
 *          unknown: Set<number>}} cites how to link [n]
 */
export function renderMarkdown(source, cites) {
  const fragment = document.createDocumentFragment();
  const tokens = markdown().parse(source, {});
  const stack = [fragment];
  for (const token of tokens) {
    const top = stack[stack.length - 1];
    if (token.type === "inline") {
      renderInline(token.children || [], top, cites);
    } else if (token.type === "fence" || token.type === "code_block") {
      const pre = el("pre");
      const code = el("code", token.content);
      const lang = (token.info || "").trim().split(/\s+/)[0];
      if (/^[\w+#.-]{1,32}$/.test(lang)) code.className = `language-${lang}`;
      pre.append(code);
      top.append(pre);
    } else if (token.type === "hr") {
      top.append(el("hr"));
    } else if (token.nesting === 1) {
      if (token.hidden) {
        stack.push(top); // a tight list's paragraph: its text goes in the item
        continue;
      }
      const node = blockElement(token);
      if (token.tag === "table") {
        const wrap = el("div", null, "table-wrap");
        wrap.append(node);
        top.append(wrap);
      } else {
        top.append(node);
      }
      stack.push(node);
    } else if (token.nesting === -1) {
      stack.pop();
    } else if (token.content) {
      top.append(document.createTextNode(token.content));
    }
  }
  return fragment;
}

function blockElement(token) {
  const node = document.createElement(TAGS.has(token.tag) ? token.tag : "div");
  if (token.tag === "ol") {
    const start = Number.parseInt(token.attrGet("start") || "", 10);
    if (Number.isFinite(start)) node.start = start;
  }
  if (token.tag === "th" || token.tag === "td") {
    // markdown-it writes alignment as a style attribute, which the CSP forbids: a class.
    const style = token.attrGet("style") || "";
    const align = /text-align:\s*(left|center|right)/.exec(style);
    if (align) node.className = `align-${align[1]}`;
  }
  return node;
}

function renderInline(children, parent, cites) {
  const stack = [parent];
  let inLink = 0;
  for (const token of children) {
    const top = stack[stack.length - 1];
    switch (token.type) {
      case "text":
        appendText(top, token.content, cites, inLink > 0);
        break;
      case "code_inline":
        top.append(el("code", token.content));
        break;
      case "softbreak":
        top.append(document.createTextNode("\n"));
        break;
      case "hardbreak":
        top.append(el("br"));
        break;
      case "link_open": {
        const link = externalLink(token.attrGet("href"), undefined);
        if (link.tagName === "SPAN") link.title = "Link removed: only http and https links are kept";
        top.append(link);
        stack.push(link);
        inLink += 1;
        break;
      }
      case "link_close":
        stack.pop();
        inLink -= 1;
        break;
      default:
        if (token.nesting === 1) {
          const node = document.createElement(TAGS.has(token.tag) ? token.tag : "span");
          top.append(node);
          stack.push(node);
        } else if (token.nesting === -1) {
          stack.pop();
        } else if (token.content) {
          top.append(document.createTextNode(token.content));
        }
    }
  }
}

function appendText(parent, text, cites, inLink) {
  if (inLink || !cites) {
    parent.append(document.createTextNode(text));
    return;
  }
  let last = 0;
  for (const match of text.matchAll(CITATION)) {
    if (match.index > last) parent.append(document.createTextNode(text.slice(last, match.index)));
    parent.append(citation(match[1], cites));
    last = match.index + match[0].length;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

function citation(inner, cites) {
  const group = el("span", null, "cite");
  group.append(document.createTextNode("["));
  inner.split(",").forEach((part, index) => {
    if (index > 0) group.append(document.createTextNode(", "));
    const n = Number.parseInt(part.trim(), 10);
    group.append(citeNumber(n, cites));
  });
  group.append(document.createTextNode("]"));
  return group;
}

function citeNumber(n, cites) {
  if (cites.unknown.has(n)) {
    const node = el("span", String(n), "cite-unknown");
    node.title = "Not one of this answer's sources";
    node.setAttribute("aria-label", `${n}, not one of this answer's sources`);
    return node;
  }
  const id = cites.sourceId(n);
  if (id === null) return document.createTextNode(String(n));
  const link = el("a", String(n), "cite-link");
  link.href = `#${id}`;
  const title = cites.sourceTitle(n);
  link.title = title;
  link.setAttribute("aria-label", `source ${n}: ${title}`);
  return link;
}

// --- Tool events ---------------------------------------------------------------------

// Why a page was not read: the fetcher's words (SPEC 7), then the gateway's for a read
// that reached no page (gateway/tools/fetch/rules.py ReadProblem).
const REASONS = {
  scheme: "only https addresses are read",
  port: "only the standard https port is read",
  userinfo: "addresses with a user name are not read",
  malformed: "the address is not valid",
  not_in_answer: "not in this answer's search results",
  not_public: "the address is not on the public internet",
  dns: "the name was not found",
  connect: "the site could not be reached",
  tls: "the site's certificate was not valid",
  timeout: "the page took too long",
  too_large: "the page is too large",
  content_type: "not a page that can be read as text",
  http_status: "the site answered with an error",
  redirects: "too many redirects",
  internal: "the page reader failed on this page",
  unreadable: "the document has no readable text (scanned, protected or damaged)",
  denied: "the operator's source lists do not allow this site",
  unavailable: "the page reader (fetcher) is not running",
  busy: "the page reader is busy with other reads",
  failed: "the page reader failed",
  budget: "the page budget for this answer is spent",
  budget_held: "the rest of the page budget is held by the other reads running now",
};

// Why a search found nothing: the `searched` event's `error` (SearXNG's failure causes,
// gateway/tools/search/answer.py FailureCause, and `budget`).
const SEARCH_ERRORS = {
  unreachable: "the search engine (SearXNG) cannot be reached",
  timeout: "the search engine (SearXNG) did not answer in time",
  broken: "the connection to the search engine (SearXNG) broke",
  bad_request: "the search engine (SearXNG) rejected the search",
  json_disabled: "the search engine (SearXNG) does not allow JSON answers",
  rate_limited: "the search engine's limiter refused the gateway (too many requests)",
  server_error: "the search engine (SearXNG) had an internal error",
  http_status: "the search engine (SearXNG) answered with an error",
  content_type: "the answer was not from the search engine (SearXNG)",
  not_json: "the answer was not from the search engine (SearXNG)",
  budget: "the search budget for this answer is spent",
};

/** A word of the stream in words: a known one's, else the word itself, readably. */
function words(table, word) {
  if (Object.hasOwn(table, word)) return table[word];
  return word.replaceAll("_", " ").slice(0, 80);
}

/** A failure reason in words (an unknown reason is shown as it is, as text). */
export function reasonText(reason) {
  if (typeof reason !== "string" || reason === "") return "it could not be read";
  return words(REASONS, reason);
}

/** Why a search found nothing, in words (an unknown cause is shown as it is, as text). */
export function searchErrorText(error) {
  return words(SEARCH_ERRORS, error);
}

const RANGES = { day: "past day", week: "past week", month: "past month", year: "past year" };

function engineName(entry) {
  if (Array.isArray(entry)) {
    const [name, why] = entry;
    return why ? `${name} (${why})` : String(name);
  }
  return String(entry);
}

// A search the gateway could not make at all (a refusal, a limit, SearXNG out of reach),
// as opposed to one that was made and failed.
const NOT_SEARCHED = new Set(["budget", "json_disabled", "rate_limited", "bad_request", "unreachable"]);

/**
 * The line a finished Web-on answer carries when none of its searches got an answer
 * (or they found nothing), saying so and why; "" when the answer had a search that
 * found something. `events` are the answer's tool events (`searched`, `read`), `sources`
 * its sources list. A search the gateway made (`"by": "gateway"`) counts like any other.
 */
export function webNote(events, sources) {
  const list = Array.isArray(events) ? events : [];
  const searches = list.filter((e) => e && e.type === "searched");
  const failure = (e) => (typeof e.error === "string" && e.error ? e.error : null);
  const answered = searches.filter((e) => !failure(e));
  if (answered.length) {
    const found = (Array.isArray(sources) && sources.length) || answered.some((e) => e.results > 0);
    return found ? "" : "the search found nothing: this answer is not from the web";
  }
  // The first failure that is not the spent budget says most (the budget was spent on it).
  const cause = searches.map(failure).find((c) => c && c !== "budget") || searches.map(failure).find(Boolean);
  if (cause) {
    return `${NOT_SEARCHED.has(cause) ? "not searched" : "the search failed"}: ${searchErrorText(cause)}`;
  }
  const read = list.some((e) => e && e.type === "read" && e.ok !== false);
  return read
    ? "not searched: only the pages named in the question were read"
    : "not searched: the model answered without searching the web";
}

/** The list item for one event, or null for events that are not lines. */
export function eventLine(event) {
  if (event.type === "searched") return searchedLine(event);
  if (event.type === "read") return readLine(event);
  return null;
}

function searchedLine(event) {
  const error = typeof event.error === "string" && event.error ? event.error : null;
  const li = el("li", null, error ? "event searched failed" : "event searched");
  const kind = error === "budget" ? "not searched: " : error ? "search failed: " : "searched: ";
  li.append(el("span", kind, "event-kind"));
  const queries = Array.isArray(event.queries) ? event.queries.map(String) : [];
  li.append(el("span", queries.map((q) => `“${q}”`).join(", ") || "(no query)", "query"));
  if (error) {
    li.append(el("span", ` — ${searchErrorText(error)}`, "reason"));
    return li;
  }
  const facts = [];
  if (RANGES[event.time_range]) facts.push(RANGES[event.time_range]);
  if (typeof event.kind === "string" && event.kind) facts.push(event.kind);
  if (Number.isFinite(event.results)) {
    facts.push(`${event.results} result${event.results === 1 ? "" : "s"}`);
  }
  if (facts.length) li.append(el("span", ` · ${facts.join(" · ")}`, "facts"));
  const silent = Array.isArray(event.unresponsive_engines) ? event.unresponsive_engines : [];
  if (silent.length) {
    li.append(el("span", ` · no answer from ${silent.map(engineName).join(", ")}`, "warn"));
  }
  return li;
}

function readLine(event) {
  const ok = event.ok !== false;
  const li = el("li", null, ok ? "event read" : "event read failed");
  li.append(el("span", ok ? "read: " : "could not read: ", "event-kind"));
  const address = typeof event.final_url === "string" && event.final_url ? event.final_url : event.url;
  const title = typeof event.title === "string" && event.title.trim() ? event.title.trim() : null;
  const host = hostOf(address);
  // Without a title, the address names the page: its host and path.
  li.append(externalLink(address, title || shortAddress(address) || String(address || "")));
  if (title && host) li.append(el("span", ` ${host}`, "host"));
  if (!ok) li.append(el("span", ` — ${reasonText(event.reason)}`, "reason"));
  return li;
}

// --- What runs now ---------------------------------------------------------------------

function shortList(items) {
  if (items.length <= 3) return items.join(", ");
  return `${items.slice(0, 2).join(", ")} and ${items.length - 2} more`;
}

/**
 * The progress line for a `working` event's calls ("searching “x”", "reading host"), or
 * "" for none. Queries and addresses are the model's: shown as text, cut short.
 */
export function workingText(calls) {
  if (!Array.isArray(calls)) return "";
  const queries = [];
  const hosts = [];
  const others = [];
  for (const call of calls) {
    if (call === null || typeof call !== "object") continue;
    if (typeof call.query === "string") {
      const query = call.query.length > 60 ? `${call.query.slice(0, 59)}…` : call.query;
      queries.push(`“${query}”`);
    } else if (typeof call.url === "string") {
      const host = hostOf(call.url) || "a page";
      if (!hosts.includes(host)) hosts.push(host);
    } else if (typeof call.tool === "string") {
      others.push(call.tool.slice(0, 60));
    }
  }
  const parts = [];
  if (queries.length) parts.push(`searching ${shortList(queries)}`);
  if (hosts.length) parts.push(`reading ${shortList(hosts)}`);
  if (others.length) parts.push(`running ${shortList(others)}`);
  return parts.join(" and ");
}
