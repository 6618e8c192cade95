// A stored conversation as the hub keeps it (REST /api/v1/conversations, docs/conversations.md):
// read with its message ids and alternatives, and changed in place: swipe to another
// answer, regenerate or continue the last one, edit, delete, fork.
//
// Every operation answers with the conversation as it now is (ids change when the branch
// does), which the chat shows again.

import { serverSentEvents } from "./a2a.js";
import { apiKey, hubUrl, request } from "./api.js";
import { shownOfParts } from "./attachments.js";
import { el } from "./ui.js";

const WRITE = { "Content-Type": "application/json", "X-Requested-With": "persona-agent-console" };

function path(personaId, contextId, rest = "") {
  return `api/v1/conversations/${encodeURIComponent(personaId)}/${encodeURIComponent(contextId)}${rest}`;
}

async function send(target, method, body) {
  const options = { method, headers: WRITE };
  if (body !== undefined) options.body = JSON.stringify(body);
  const response = await request(target, options);
  return response.status === 204 ? null : response.json();
}

// Regenerate or continue the last answer, as server-sent events (the turn is an A2A task
// of the persona, docs/conversations.md): `onText(piece)` is told each piece of the answer
// as it is written; the answer ({answer, conversation, cost, ...}: the conversation as it
// then is, the turn's cost-v1), or the error the turn ended with.
async function generate(personaId, contextId, rest, onText) {
  const response = await request(path(personaId, contextId, rest), {
    method: "POST",
    headers: { ...WRITE, Accept: "text/event-stream" },
    body: "{}",
  });
  for await (const event of serverSentEvents(response)) {
    if ("answer" in event) return event;
    if ("detail" in event) throw new Error(event.detail);
    if (typeof event.text === "string" && onText) onText(event.text);
  }
  throw new Error("The hub's answer ended before the persona's");
}

export async function readConversation(personaId, contextId) {
  return (await request(path(personaId, contextId))).json();
}

export const operations = {
  edit: (p, c, id, content) => send(path(p, c, `/messages/${id}`), "PATCH", { content }),
  remove: (p, c, id) => send(path(p, c, `/messages/${id}?following=false`), "DELETE"),
  select: (p, c, anchor, selected) => send(path(p, c, `/swipes/${anchor}`), "PUT", { selected }),
  regenerate: (p, c, onText) => generate(p, c, "/regenerate", onText),
  continue: (p, c, onText) => generate(p, c, "/continue", onText),
  fork: (p, c, id) => send(path(p, c, "/fork"), "POST", { message_id: id }),
};

const BROWSER_USER = "persona-agent.userPersona";

// An anonymous caller's user persona, kept by this browser (the hub keeps none for it):
// sent with the first message of each new conversation.
function browserUser() {
  try {
    const user = JSON.parse(localStorage.getItem(BROWSER_USER) || "null");
    if (!user || typeof user.name !== "string" || !user.name) return null;
    return { name: user.name, description: typeof user.description === "string" ? user.description : "" };
  } catch {
    return null;
  }
}

// The caller's saved user persona, or null: asked without prompting for a key, and only
// with one (an anonymous caller's is this browser's).
async function savedQuietly() {
  if (!apiKey()) return browserUser();
  const headers = { Authorization: `Bearer ${apiKey()}` };
  try {
    const response = await fetch(hubUrl("api/v1/user-persona"), { cache: "no-cache", headers });
    const body = response.ok ? await response.json() : null;
    return body && body.name ? body : null;
  } catch {
    return null;
  }
}

// The user persona: the caller's saved one, or one conversation's.
export const userPersona = {
  savedQuietly,
  save: async (user) => {
    if (apiKey()) return send("api/v1/user-persona", "PUT", user);
    localStorage.setItem(BROWSER_USER, JSON.stringify(user));
    return null;
  },
  forget: async () => {
    if (apiKey()) return send("api/v1/user-persona", "DELETE");
    localStorage.removeItem(BROWSER_USER);
    return null;
  },
  ofConversation: (p, c) => request(path(p, c, "/user")).then((r) => r.json()),
  saveFor: (p, c, user) => send(path(p, c, "/user"), "PUT", user),
  forgetFor: (p, c) => send(path(p, c, "/user"), "DELETE"),
};

function contentText(message) {
  return typeof message.content === "string" ? message.content : "";
}

// A document as the model read it, in a message's content (docs/media.md#documents):
// "[document: NAME]", its text, then "[end of NAME]" or "[NAME is cut here: ...]".
function withoutDocument(text, name) {
  const start = text.indexOf(`[document: ${name}]\n`);
  if (start < 0) return text;
  const ends = [`\n[end of ${name}]`, `\n[${name} is cut here:`].map((mark) => text.indexOf(mark, start));
  const found = ends.filter((at) => at >= 0);
  if (!found.length) return text;
  const close = text.indexOf("]", Math.min(...found) + 2);
  return close < 0 ? text : text.slice(0, start) + text.slice(close + 1);
}

// What a user message shows: the text of its parts when the hub gives them (the REST
// read's `parts`), without the text of its documents (shown as chips), else its content.
function shownText(message) {
  if (!Array.isArray(message.parts)) return contentText(message);
  let text = message.parts
    .filter((part) => part.kind === "text")
    .map((part) => part.text)
    .join("\n\n");
  for (const part of message.parts) {
    if (part.kind === "file" && part.name) text = withoutDocument(text, part.name);
  }
  return text.replace(/\n{3,}/g, "\n\n").trim();
}

// The conversation as the chat shows it: an optional greeting, then user messages and the
// answers after them. An answer is the assistant's messages (tool calls and results
// included) up to the next user message; it is shown as its text, and edited or deleted
// through its last message with text. Its alternatives are on its first message.
export function turnsOf(conversation) {
  const turns = [];
  let answer = null;
  const close = () => {
    if (answer) turns.push(answer);
    answer = null;
  };
  for (const message of conversation.messages || []) {
    if (message.role === "user") {
      close();
      const own = contentText(message);
      const attachments = shownOfParts(message.parts);
      turns.push({ kind: "user", id: message.id, text: shownText(message), own, attachments });
    } else if (message.role === "assistant" || message.role === "tool") {
      if (!answer) {
        const greeting = !turns.some((turn) => turn.kind === "user");
        answer = { kind: greeting ? "greeting" : "answer", id: null, texts: [], swipes: message.swipes || null };
        answer.first = message.id;
      }
      const text = message.role === "assistant" ? contentText(message) : "";
      if (text) {
        answer.texts.push(text);
        answer.id = message.id;
      } else if (answer.id === null && message.role === "assistant") {
        answer.id = message.id;
      }
    }
  }
  close();
  for (const turn of turns) {
    if (!turn.texts) continue;
    turn.text = turn.texts.join("\n\n");
    turn.own = turn.texts.length ? turn.texts[turn.texts.length - 1] : ""; // what editing changes
  }
  const answers = turns.filter((turn) => turn.kind === "answer");
  if (answers.length) answers[answers.length - 1].last = true;
  const final = turns[turns.length - 1];
  if (final && final.kind === "user") final.unanswered = true; // its answer was deleted
  return turns;
}

function small(label, className, title, onClick) {
  return el("button", { type: "button", class: `small ${className}`, title, "aria-label": title, on: { click: onClick } }, label);
}

// ‹ 2/3 ›: the alternatives of an answer (or the greetings to choose from). `onNext` at the
// last one is `atEnd` when given (regenerate: a new alternative).
export function swipeControl(position, count, onPick, atEnd = null) {
  const previous = small("‹", "swipe-prev", "Previous alternative", () => onPick(position - 1));
  previous.disabled = position <= 0;
  const last = position >= count - 1;
  const next = small("›", "swipe-next", last && atEnd ? "A new alternative" : "Next alternative", () =>
    last ? atEnd && atEnd() : onPick(position + 1),
  );
  next.disabled = last && !atEnd;
  return el(
    "span",
    { class: "swipes", dataset: { position: String(position), count: String(count) } },
    previous,
    el("span", { class: "swipe-count" }, `${position + 1}/${count}`),
    next,
  );
}

// The row of actions under one shown turn. `act(name, ...args)` runs an operation;
// `startEdit()` puts the text in place for editing.
export function turnActions(turn, act, startEdit) {
  const row = el("div", { class: "turn-actions" });
  const swipes = turn.swipes;
  if (swipes && swipes.count > 1) {
    const atEnd = turn.last ? () => act("regenerate") : null;
    row.append(swipeControl(swipes.selected, swipes.count, (k) => act("select", swipes.anchor, k), atEnd));
  } else if (turn.last) {
    row.append(swipeControl(0, 1, () => {}, () => act("regenerate")));
  }
  if (turn.last) {
    row.append(small("↻", "regenerate", "Regenerate this answer", () => act("regenerate")));
    row.append(small("Continue", "continue", "Continue this answer", () => act("continue")));
  }
  if (turn.unanswered) {
    row.append(small("Answer", "answer-again", "Answer this message", () => act("regenerate")));
  }
  if (turn.id !== null && turn.id !== undefined) {
    row.append(small("Edit", "edit", "Edit this message", startEdit));
    row.append(small("Fork", "fork", "A new conversation up to this message", () => act("fork", turn.id)));
    row.append(small("Delete", "delete-message", "Delete this message", () => act("remove", turn.id)));
  }
  return row;
}

// The text of a bubble as a field with Save and Cancel; resolves to the new text, or null.
export function editInPlace(bubble, text) {
  const body = bubble.querySelector(".text");
  const field = el("textarea", { class: "edit-text", rows: Math.min(12, Math.max(3, text.split("\n").length + 1)) });
  field.value = text;
  return new Promise((resolve) => {
    const done = (value) => {
      form.remove();
      body.hidden = false;
      resolve(value);
    };
    const form = el(
      "form",
      { class: "edit-form", on: { submit: (event) => (event.preventDefault(), done(field.value)) } },
      field,
      el(
        "div",
        { class: "buttons" },
        el("button", { type: "submit", class: "primary small edit-save" }, "Save"),
        el("button", { type: "button", class: "small edit-cancel", on: { click: () => done(null) } }, "Cancel"),
      ),
    );
    field.addEventListener("keydown", (event) => {
      if (event.key === "Escape") done(null);
    });
    body.hidden = true;
    body.after(form);
    field.focus();
  });
}
