// What the page keeps in this browser's local storage: the access key (until the person
// forgets it), the chosen model, the Web switch and the conversation. Nothing else is
// kept, and nothing is sent anywhere but this gateway.

const KEYS = {
  key: "tigress.key",
  model: "tigress.model",
  web: "tigress.web",
  chat: "tigress.chat.v1",
};

function get(name) {
  try {
    return localStorage.getItem(KEYS[name]);
  } catch {
    return null; // storage disabled: the page still works, it just forgets
  }
}

/** Store a value; false when the browser refused (full, or storage disabled). */
function set(name, value) {
  try {
    if (value === null) localStorage.removeItem(KEYS[name]);
    else localStorage.setItem(KEYS[name], value);
    return true;
  } catch {
    return false;
  }
}

export const store = {
  key: () => get("key") || "",
  setKey: (key) => set("key", key || null),
  model: () => get("model") || "",
  setModel: (model) => set("model", model || null),
  web: () => get("web") === "1",
  setWeb: (on) => set("web", on ? "1" : "0"),
  /** The saved conversation: a list of message objects (empty when none or unreadable). */
  messages() {
    const raw = get("chat");
    if (!raw) return [];
    try {
      const saved = JSON.parse(raw);
      return Array.isArray(saved.messages) ? saved.messages.filter(valid) : [];
    } catch {
      return [];
    }
  },
  saveMessages: (messages) => set("chat", JSON.stringify({ messages })),
};

function valid(m) {
  return m && (m.role === "user" || m.role === "assistant") && typeof m.content === "string";
}
