// Small pieces of the page: building elements, dialogs, toasts, avatars.

// An element: el("li", {class: "x", dataset: {id: "y"}}, "text", child). Text is always
// set as text, never parsed as HTML: a persona's fields are shown as their authors wrote
// them, and markup in them stays inert.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name in node && typeof value !== "string") node[name] = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function toast(message, kind = "info") {
  const item = el("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, message);
  document.getElementById("toasts").append(item);
  setTimeout(() => item.remove(), kind === "error" ? 10000 : 5000);
}

// One key prompt at a time: requests refused together wait for the same answer.
let keyPrompt = null;

// Its Cancel is no submit button, so that Enter in the key's field means "use this key".
document
  .getElementById("key-dialog-cancel")
  .addEventListener("click", () => document.getElementById("key-dialog").close("cancel"));

// Ask for an API key; resolves to the key given, or "" if none was.
export function askForKey(message, hadKey) {
  if (keyPrompt) return keyPrompt;
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-dialog-input");
  document.getElementById("key-dialog-message").textContent = hadKey
    ? `The hub refused the key: ${message}`
    : `The hub needs an API key: ${message}`;
  input.value = "";
  keyPrompt = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        keyPrompt = null;
        const key = input.value.trim();
        input.value = "";
        resolve(dialog.returnValue === "ok" ? key : "");
      },
      { once: true },
    );
  });
  dialog.returnValue = "";
  dialog.showModal();
  input.focus();
  return keyPrompt;
}

// A yes-or-no question in the page's own dialog; resolves true for OK.
export function confirmDialog(message, okLabel = "OK") {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-message").textContent = message;
  document.getElementById("confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

function hue(text) {
  let hash = 0;
  for (const char of text) hash = (hash * 31 + char.codePointAt(0)) % 360;
  return hash;
}

function initials(name) {
  const words = name.split(/\s+/).filter(Boolean);
  const letters = words.length > 1 ? [words[0], words[words.length - 1]] : words;
  return letters.map((word) => word[0].toUpperCase()).join("") || "?";
}

// The persona's picture when its card has one (the card's iconUrl; the console loads it
// from its own origin, /a2a/{id}/avatar), else its initials on a colour of its own.
export function avatar(personaId, name, card, hubUrl, size = "") {
  if (card && card.iconUrl) {
    const version = encodeURIComponent(card.version || "");
    return el("img", {
      class: `avatar ${size}`,
      src: hubUrl(`a2a/${encodeURIComponent(personaId)}/avatar?v=${version}`),
      alt: "",
      loading: "lazy",
    });
  }
  const placeholder = el("div", { class: `avatar placeholder ${size}`, "aria-hidden": "true" }, initials(name));
  placeholder.style.setProperty("--hue", String(hue(personaId)));
  return placeholder;
}

export function errorBox(error) {
  const box = el("div", { class: "error-box", role: "alert" }, error.message || String(error));
  if (error.problems && error.problems.length > 1) {
    box.append(el("ul", {}, error.problems.map((problem) => el("li", {}, problem))));
  }
  return box;
}
