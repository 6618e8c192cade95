// The conversations this browser has had, in localStorage: which contextIds to offer for
// resuming, and a copy of their turns for a hub that does not list a conversation's tasks
// (PERSONA_AGENT_TASK_LISTING=off). The hub keeps the conversation itself: resuming is
// sending with the same contextId.

const STORAGE = "persona-agent.conversations";
const MAX_CONVERSATIONS = 200;
const MAX_TURNS = 100;
const MAX_TEXT = 20000;

function load() {
  try {
    const value = JSON.parse(localStorage.getItem(STORAGE) || "[]");
    return Array.isArray(value) ? value : [];
  } catch {
    return [];
  }
}

function store(conversations) {
  const kept = conversations.sort((a, b) => b.updated - a.updated).slice(0, MAX_CONVERSATIONS);
  try {
    localStorage.setItem(STORAGE, JSON.stringify(kept));
  } catch {
    // storage full: keep half, the newest
    localStorage.setItem(STORAGE, JSON.stringify(kept.slice(0, MAX_CONVERSATIONS / 2)));
  }
}

// This persona's conversations, the latest first.
export function conversationsOf(personaId) {
  return load().filter((conversation) => conversation.persona === personaId);
}

export function conversation(personaId, contextId) {
  return conversationsOf(personaId).find((c) => c.contextId === contextId) || null;
}

// Record a turn of a conversation (a new conversation is added).
export function recordTurn(personaId, contextId, turn) {
  const all = load();
  let entry = all.find((c) => c.persona === personaId && c.contextId === contextId);
  if (!entry) {
    entry = { persona: personaId, contextId, title: turn.user.slice(0, 80), turns: [] };
    all.push(entry);
  }
  const clipped = {
    taskId: turn.taskId,
    user: turn.user.slice(0, MAX_TEXT),
    answer: (turn.answer || "").slice(0, MAX_TEXT),
    state: turn.state || "",
    detail: (turn.detail || "").slice(0, 500),
  };
  const index = entry.turns.findIndex((t) => t.taskId && t.taskId === turn.taskId);
  if (index >= 0) entry.turns[index] = clipped;
  else entry.turns.push(clipped);
  entry.turns = entry.turns.slice(-MAX_TURNS);
  entry.updated = Date.now();
  store(all);
}

// Add a conversation made otherwise than by a first message (a fork), with its title.
export function remember(personaId, contextId, title) {
  const all = load();
  if (!all.some((c) => c.persona === personaId && c.contextId === contextId)) {
    all.push({ persona: personaId, contextId, title: title.slice(0, 80), turns: [], updated: Date.now() });
    store(all);
  }
}

export function forget(personaId, contextId) {
  store(load().filter((c) => !(c.persona === personaId && c.contextId === contextId)));
}

// A deleted persona's conversations went with it on the hub; they go here too.
export function forgetPersona(personaId) {
  store(load().filter((c) => c.persona !== personaId));
}
