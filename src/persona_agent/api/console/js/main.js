// The console's pages, by the address's hash: #/ (gallery), #/chat/{id}[/{contextId}],
// #/edit/{id}, #/new. Each page is a function that fills a fresh element and may return
// {leave()}, called when another page replaces it.

import { apiKey, setApiKey } from "./api.js";
import { showChat } from "./chat.js";
import { showEditor } from "./editor.js";
import { showGallery } from "./gallery.js";

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
  else if (name === "new") shown = showEditor(root, null);
  else shown = showGallery(root);
  const result = await shown;
  if (view.firstChild === root) page = result;
  else if (result && result.leave) result.leave();
  root.dataset.ready = "true";
}

function showKeyState() {
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

window.addEventListener("hashchange", render);
setUpKeyForm();
render();
