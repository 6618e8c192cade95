// What a persona remembers of the caller (REST /api/v1/memory and
// /api/v1/personas/{id}/memories, docs/memory.md): the page #/memory/{id} lists it, forgets
// one memory or all of them; memoryState() tells the chat whether memory is on for whom.

import { apiKey, getJson, hubUrl, request } from "./api.js";
import { confirmDialog, el, errorBox, toast } from "./ui.js";

// {on, caller} (caller null: anonymous), or null when the hub does not say (an older hub,
// or one that wants a key this tab has not given): asked without prompting for a key.
export async function memoryState() {
  const headers = apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
  try {
    const response = await fetch(hubUrl("api/v1/memory"), { cache: "no-cache", headers });
    return response.ok ? await response.json() : null;
  } catch {
    return null;
  }
}

// What to tell a caller the hub cannot tell apart, while memory is on; "" otherwise.
export function anonymousMemoryNote(state, name) {
  if (!state || !state.on || state.caller) return "";
  return (
    `Memory is on, but the hub does not know who you are (no API key): ${name} remembers ` +
    "within this conversation only, and a new conversation starts with nothing remembered."
  );
}

const memoriesPath = (personaId) => `api/v1/personas/${encodeURIComponent(personaId)}/memories`;

// Every memory of the caller with the persona, newest first, page after page.
async function allMemories(personaId) {
  const items = [];
  let before = null;
  do {
    const query = before ? `?limit=500&before=${before}` : "?limit=500";
    const page = await getJson(memoriesPath(personaId) + query);
    items.push(...page.items);
    before = page.next;
  } while (before);
  return items;
}

function memoryItem(personaId, memory, name, forgotten) {
  const forget = el("button", { type: "button", class: "small danger forget-memory" }, "Forget");
  const item = el(
    "li",
    { class: "memory", dataset: { memoryId: String(memory.id) } },
    el("div", { class: "memory-who" }, memory.role === "user" ? "You said" : `${name} said`),
    el("div", { class: "memory-text" }, memory.text),
    el("div", { class: "memory-when note" }, new Date(memory.rememberedAt).toLocaleString()),
    forget,
  );
  forget.addEventListener("click", async () => {
    try {
      await request(`${memoriesPath(personaId)}/${memory.id}`, { method: "DELETE" });
      item.remove();
      forgotten();
      toast("Forgotten");
    } catch (error) {
      item.append(errorBox(error));
    }
  });
  return item;
}

export async function showMemory(root, personaId) {
  const heading = el("h1", {}, "Memory");
  const note = el("p", { id: "memory-note", class: "note" });
  const list = el("ol", { id: "memory-list", class: "memory-list" });
  const forgetAll = el("button", { type: "button", id: "forget-all", class: "danger", hidden: true }, "Forget all");
  const back = el("a", { href: `#/chat/${encodeURIComponent(personaId)}` }, "Back to the chat");
  root.append(el("section", { class: "memory-page" }, heading, back, note, forgetAll, list));
  let name = personaId;
  try {
    name = (await getJson(`api/v1/personas/${encodeURIComponent(personaId)}`)).name || personaId;
  } catch (error) {
    root.append(errorBox(error));
    return null;
  }
  heading.textContent = `What ${name} remembers of you`;
  const state = await memoryState();
  if (!state || !state.on) {
    note.textContent = `Memory is off on this hub: ${name} remembers only what is in the conversation.`;
    return null;
  }
  if (!state.caller) {
    note.textContent =
      `The hub does not know who you are (no API key): ${name} remembers within one ` +
      "conversation only, and there is nothing kept of you to show here. With an API key, " +
      `${name} remembers you across conversations, and this page shows it.`;
    return null;
  }
  const counted = () => {
    const count = list.children.length;
    note.textContent = count
      ? `${count} ${count === 1 ? "memory" : "memories"}, newest first.`
      : `${name} remembers nothing of you.`;
    forgetAll.hidden = count === 0;
  };
  try {
    const memories = await allMemories(personaId);
    list.replaceChildren(...memories.map((m) => memoryItem(personaId, m, name, counted)));
    counted();
  } catch (error) {
    root.append(errorBox(error));
  }
  forgetAll.addEventListener("click", async () => {
    const sure = await confirmDialog(`Forget everything ${name} remembers of you?`, "Forget all");
    if (!sure) return;
    try {
      for (const item of [...list.children]) {
        await request(`${memoriesPath(personaId)}/${item.dataset.memoryId}`, { method: "DELETE" });
        item.remove();
      }
      toast(`${name} remembers nothing of you now`);
    } catch (error) {
      root.append(errorBox(error));
    }
    counted();
  });
  return null;
}
