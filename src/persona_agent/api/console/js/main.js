// The console's pages, by the address's hash: #/ (gallery), #/chat/{id}[/{contextId}],
// #/edit/{id}, #/new, #/memory/{id}. Each page is a function that fills a fresh element and may return
// {leave()}, called when another page replaces it.

import { apiKey, hubUrl, keyWanted, setApiKey, setKeyWanted } from "./api.js";
import { showChat } from "./chat.js";
import { showEditor } from "./editor.js";
import { showGallery } from "./gallery.js";
import { showMemory } from "./memory.js";

const view = document.getElementById("view");
let page = null;

async function render() {
  if (page && page.leave) page.leave();
  page = null;
  // Each page fills its own element: one still loading when the address changes fills
  // an element no longer shown.
  const root = document.createElement("div");
  root.className = "page";
  view.replaceChildren(root);
  const [name, id, contextId] = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  let shown;
  if (name === "chat" && id) shown = showChat(root, id, contextId || "");
  else if (name === "edit" && id) shown = showEditor(root, id);
  else if (name === "memory" && id) shown = showMemory(root, id);
  else if (name === "new") shown = showEditor(root, null);
  else shown = showGallery(root);
  const result = await shown;
  if (view.firstChild === root) page = result;
  else if (result && result.leave) result.leave();
  root.dataset.ready = "true";
}

// The key field shows on a hub that asks for a key (or once one is set), not on a keyless one.
function showKeyState() {
  document.getElementById("key-form").hidden = !(apiKey() || keyWanted());
  const state = document.getElementById("key-state");
  state.textContent = apiKey() ? "key set for this tab" : "";
  document.getElementById("key-forget").hidden = !apiKey();
}

function setUpKeyForm() {
  const form = document.getElementById("key-form");
  const input = document.getElementById("key-input");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    setApiKey(input.value.trim());
    input.value = "";
    render();
  });
  // The page stays as it is; the next request that needs a key asks for one.
  document.getElementById("key-forget").addEventListener("click", () => setApiKey(""));
  window.addEventListener("apikeychange", showKeyState);
  showKeyState();
}

// Whether the REST API wants a credential: a read without one answers 401.
async function probeKey() {
  try {
    const response = await fetch(hubUrl("api/v1/personas?limit=1"), { cache: "no-cache" });
    if (response.status === 401) setKeyWanted();
  } catch {
    // the pages say what is wrong with the hub when they load
  }
}

// On a narrow screen the header's links and key field fold under a menu button.
function setUpMenu() {
  const toggle = document.getElementById("menu-toggle");
  const open = (value) => {
    document.body.classList.toggle("menu-open", value);
    toggle.setAttribute("aria-expanded", String(value));
  };
  toggle.addEventListener("click", () => open(!document.body.classList.contains("menu-open")));
  window.addEventListener("hashchange", () => open(false));
}

window.addEventListener("hashchange", render);
setUpMenu();
setUpKeyForm();
probeKey();
render();
