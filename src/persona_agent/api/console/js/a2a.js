// The console as an A2A client: the persona's own HTTP+JSON endpoint, protocol 1.0.
//
// SendStreamingMessage is a POST whose answer is server-sent events, which EventSource
// cannot send: the stream is read from fetch() and its events parsed here.

import { getJson, request } from "./api.js";

const A2A = { "A2A-Version": "1.0", "Content-Type": "application/json" };

function endpoint(personaId, rest) {
  return `a2a/${encodeURIComponent(personaId)}/${rest}`;
}

// A random id that does not need a secure context (crypto.randomUUID needs one; a hub
// reached over plain HTTP by a name other than localhost is not).
export function newId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// The JSON of each event of a server-sent event stream (the data lines of one event,
// joined; comments such as keep-alive pings skipped).
export async function* serverSentEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const boundary = /\r\n\r\n|\n\n|\r\r/;
  const parse = (block) => {
    const data = block
      .split(/\r\n|\n|\r/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    return data ? JSON.parse(data) : null;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let match;
      while ((match = boundary.exec(buffer))) {
        const event = parse(buffer.slice(0, match.index));
        buffer = buffer.slice(match.index + match[0].length);
        if (event) yield event;
      }
    }
    const last = parse(buffer);
    if (last) yield last;
  } finally {
    reader.releaseLock();
  }
}

// Send a message and yield the stream's events: {task}, {statusUpdate}, {artifactUpdate}
// or {message}. Without a contextId the hub starts a new conversation (its id is in the
// first event). `metadata`: the message's, such as an extension's value; `files`: A2A file
// parts sent after the text ({raw, mediaType, filename}); `accepted`: the output modes the
// answer may use (acceptedOutputModes: audio/wav asks for the voice artifact).
export async function* streamMessage(personaId, text, contextId, signal, { metadata = null, files = [], accepted = null } = {}) {
  const parts = [...(text ? [{ text }] : []), ...files];
  const message = { messageId: newId(), role: "ROLE_USER", parts };
  if (contextId) message.contextId = contextId;
  if (metadata) message.metadata = metadata;
  const body = { message };
  if (accepted) body.configuration = { acceptedOutputModes: accepted };
  const response = await request(endpoint(personaId, "message:stream"), {
    method: "POST",
    headers: { ...A2A, Accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
  yield* serverSentEvents(response);
}

export async function cancelTask(personaId, taskId) {
  const response = await request(endpoint(personaId, `tasks/${encodeURIComponent(taskId)}:cancel`), {
    method: "POST",
    headers: A2A,
    body: "{}",
  });
  return response.json();
}

// Every task of one conversation (ListTasks with its contextId), oldest first, with its
// artifacts: the conversation's turns as the hub keeps them.
export async function conversationTasks(personaId, contextId) {
  const tasks = [];
  let pageToken = "";
  for (let page = 0; page < 20; page += 1) {
    const query = new URLSearchParams({ contextId, includeArtifacts: "true", pageSize: "100" });
    if (pageToken) query.set("pageToken", pageToken);
    const response = await request(`${endpoint(personaId, "tasks")}?${query}`, {
      headers: { "A2A-Version": "1.0" },
    });
    const body = await response.json();
    tasks.push(...(body.tasks || []));
    pageToken = body.nextPageToken || "";
    if (!pageToken) break;
  }
  const when = (task) => (task.status && task.status.timestamp) || "";
  return tasks.sort((a, b) => when(a).localeCompare(when(b)));
}

export function card(personaId) {
  return getJson(endpoint(personaId, ".well-known/agent-card.json"));
}

export function textOf(parts) {
  return (parts || [])
    .filter((part) => typeof part.text === "string")
    .map((part) => part.text)
    .join("");
}

// The cost-v1 data of a completed answer (tokens, duration, cost), if it has one.
export function costOf(message) {
  const part = ((message && message.parts) || []).find((p) => p.data && p.data.kind === "cost-v1");
  return part ? part.data : null;
}

// The memory-v1 data of an answer (what memory brought into its prompt, what the persona
// kept or forgot with its memory tools), if it has one: docs/memory.md.
export function memoryOf(message) {
  const part = ((message && message.parts) || []).find((p) => p.data && p.data.kind === "memory-v1");
  return part ? part.data : null;
}

// "TASK_STATE_INPUT_REQUIRED" -> "input required"
export function stateName(state) {
  return String(state || "")
    .replace(/^TASK_STATE_/, "")
    .toLowerCase()
    .replace(/_/g, " ");
}

export const GREETING_EXTENSION = "urn:persona-agent:extension:greeting:v1";
// Who the user is, in a message's metadata: {name, description} (docs/a2a.md).
export const USER_EXTENSION = "urn:persona-agent:extension:user:v1";
// Regenerate, continue, or a new conversation's greeting ({greeting: k}), in a message's
// metadata (docs/a2a.md).
export const CONVERSATION_EXTENSION = "urn:persona-agent:extension:conversation:v1";

export function greetingOf(agentCard) {
  const extensions = (agentCard && agentCard.capabilities && agentCard.capabilities.extensions) || [];
  const greeting = extensions.find((extension) => extension.uri === GREETING_EXTENSION);
  return (greeting && greeting.params && greeting.params.greeting) || "";
}

// The card's greetings: its greeting, then its alternate greetings (a character card's),
// for a new conversation to open with the one chosen.
export function greetingsOf(agentCard) {
  const extensions = (agentCard && agentCard.capabilities && agentCard.capabilities.extensions) || [];
  const greeting = extensions.find((extension) => extension.uri === GREETING_EXTENSION);
  const params = (greeting && greeting.params) || {};
  return params.greeting ? [params.greeting, ...(params.alternateGreetings || [])] : [];
}

// Whether the card is a panel's (its conversation skill tagged "panel"): its turns are
// each member's answers, read back from its tasks.
export function isPanel(agentCard) {
  return ((agentCard && agentCard.skills) || []).some((skill) => (skill.tags || []).includes("panel"));
}
