// A conversation with one persona, streamed through its A2A HTTP+JSON endpoint.
//
// #/chat/{id} starts a new conversation; #/chat/{id}/{contextId} resumes one: its turns
// are read back from the hub (ListTasks of that context) and the next message is sent
// with the same contextId, which the hub continues with the conversation's history.
// A contextId this browser does not know (a link from someone else) is joined only once
// the user says so: without keys, whoever knows a contextId reads the conversation.

import {
  cancelTask,
  card,
  conversationTasks,
  costOf,
  greetingOf,
  memoryOf,
  stateName,
  streamMessage,
  textOf,
} from "./a2a.js";
import { hubUrl } from "./api.js";
import { conversation, conversationsOf, forget, recordTurn } from "./conversations.js";
import { avatar, confirmDialog, el, errorBox } from "./ui.js";

// The states after which a stream has nothing more to say about its task.
const FINAL = new Set(["completed", "failed", "canceled", "rejected", "input required", "auth required"]);

// The text of a turn's artifacts: a persona's one "answer" as it is; a panel's answers (one
// artifact per member's turn, named after the member) each under its name.
function artifactsText(artifacts) {
  const shown = artifacts.filter((a) => a.text);
  if (shown.length === 1 && shown[0].name === "answer") return shown[0].text;
  return shown.map((a) => (a.name && a.name !== "answer" ? `${a.name}\n${a.text}` : a.text)).join("\n\n");
}

function chatHref(personaId, contextId) {
  const base = `#/chat/${encodeURIComponent(personaId)}`;
  return contextId ? `${base}/${encodeURIComponent(contextId)}` : base;
}

function describeCost(cost) {
  if (!cost) return "";
  const parts = [];
  if (cost.usage && cost.usage.totalTokens) parts.push(`${cost.usage.totalTokens} tokens`);
  if (cost.durationMs) parts.push(`${(cost.durationMs / 1000).toFixed(1)} s`);
  if (typeof cost.costUsd === "number") parts.push(`$${cost.costUsd.toFixed(4)}`);
  if (cost.demoModel) parts.push("demo model"); // the embedded model: docs/local-model.md
  return parts.join(" · ");
}

// A folded note of what memory did for an answer: the items it brought into the prompt,
// the facts the persona kept, the items it forgot (nothing when it did nothing).
function rememberedNote(memory) {
  const lines = [
    ...((memory && memory.recalled) || []),
    ...((memory && memory.kept) || []).map((text) => `Kept: ${text}`),
    ...((memory && memory.forgotten) || []).map((text) => `Forgot: ${text}`),
  ];
  if (!lines.length) return null;
  return el(
    "details",
    { class: "remembered" },
    el("summary", {}, `Remembered (${lines.length})`),
    el("ul", {}, ...lines.map((line) => el("li", {}, line))),
  );
}

// One bubble of the transcript; set(text, state, detail) changes it as events come, and
// remember(memory) adds what memory did for it.
// Whether a status message is the hub's report of what the model does before it writes.
function progressOf(message) {
  return ((message && message.parts) || []).some((part) => part.data && part.data.kind === "progress");
}

function bubble(role, text, state = "") {
  const body = el("div", { class: "text" }, text);
  const meta = el("div", { class: "meta" });
  const item = el("li", { class: `turn ${role}`, dataset: { state } }, body, meta);
  item.set = (newText, newState, detail = "") => {
    if (newText !== null) body.textContent = newText;
    if (newState !== null) item.dataset.state = newState;
    const shownState = role === "agent" && newState && newState !== "completed" ? newState : "";
    meta.textContent = [shownState, detail].filter(Boolean).join(" · ");
  };
  item.remember = (memory) => {
    const note = rememberedNote(memory);
    if (note) item.append(note);
  };
  if (state && role === "agent") item.set(null, state);
  return item;
}

export async function showChat(root, personaId, contextId) {
  const transcript = el("ol", { id: "transcript", class: "transcript" });
  const note = el("p", { id: "transcript-note", class: "note" });
  const input = el("textarea", {
    id: "message-input",
    rows: 3,
    placeholder: "Write a message (Enter sends, Shift+Enter starts a new line)",
  });
  const send = el("button", { type: "submit", id: "send", class: "primary" }, "Send");
  const cancel = el("button", { type: "button", id: "cancel", class: "danger", hidden: true }, "Cancel");
  const list = el("ul", { id: "conversation-list", class: "conversation-list" });
  const head = el("div", { class: "persona-head" });
  const composer = el("form", { id: "composer", class: "composer" }, input, el("div", { class: "buttons" }, send, cancel));
  // On a narrow screen the sidebar folds to its head and this button.
  const sidebarToggle = el("button", {
    type: "button",
    id: "sidebar-toggle",
    class: "sidebar-toggle",
    "aria-expanded": "false",
    on: {
      click: (event) => {
        const open = event.currentTarget.closest(".sidebar").classList.toggle("open");
        event.currentTarget.setAttribute("aria-expanded", String(open));
      },
    },
  }, "Conversations");
  root.append(
    el(
      "section",
      { class: "chat", dataset: { personaId } },
      el(
        "aside",
        { class: "sidebar" },
        head,
        sidebarToggle,
        el("a", { class: "button primary", id: "new-conversation", href: chatHref(personaId) }, "New conversation"),
        el("h2", {}, "Conversations"),
        list,
      ),
      el("div", { class: "thread" }, transcript, note, composer),
    ),
  );

  let current = contextId || "";
  let running = null; // {taskId, controller} while an answer streams
  let greeting = "";
  // Nothing is read from or sent to a conversation this browser did not start or join
  // until the user agrees to join it.
  let joined = !current || Boolean(conversation(personaId, current));
  send.disabled = !joined;

  const renderList = () => {
    const conversations = conversationsOf(personaId);
    list.replaceChildren(
      ...conversations.map((c) =>
        el(
          "li",
          { class: c.contextId === current ? "current" : "", dataset: { contextId: c.contextId } },
          el("a", { href: chatHref(personaId, c.contextId), title: c.contextId }, c.title || c.contextId),
          el(
            "button",
            {
              type: "button",
              class: "forget",
              title: "Forget this conversation in this browser",
              "aria-label": "Forget",
              on: {
                click: () => {
                  forget(personaId, c.contextId);
                  if (c.contextId === current) location.hash = chatHref(personaId);
                  else renderList();
                },
              },
            },
            "×",
          ),
        ),
      ),
    );
    if (!conversations.length) list.append(el("li", { class: "empty" }, "None yet"));
  };

  const setRunning = (value) => {
    running = value;
    send.disabled = Boolean(value);
    cancel.hidden = !value;
    cancel.disabled = !(value && value.taskId);
  };

  const showTurns = (turns) => {
    transcript.replaceChildren();
    if (greeting) transcript.append(bubble("agent greeting", greeting, "completed"));
    for (const turn of turns) {
      transcript.append(bubble("user", turn.user));
      const answer = bubble("agent", turn.answer, turn.state);
      if (turn.detail) answer.set(null, turn.state, turn.detail);
      if (turn.memory) answer.remember(turn.memory);
      transcript.append(answer);
    }
    transcript.scrollTop = transcript.scrollHeight;
  };

  // A resumed conversation's turns: the hub's tasks of the context, else this browser's copy.
  const loadTurns = async () => {
    const local = conversation(personaId, current);
    try {
      const tasks = await conversationTasks(personaId, current);
      if (tasks.length) {
        showTurns(
          tasks.map((task) => {
            const user = (task.history || []).find((m) => m.role === "ROLE_USER");
            const answer = artifactsText((task.artifacts || []).map((a) => ({ name: a.name, text: textOf(a.parts) })));
            const status = task.status || {};
            const said = textOf(status.message && status.message.parts);
            const completed = status.state === "TASK_STATE_COMPLETED";
            return {
              user: user ? textOf(user.parts) : "",
              answer: answer || (completed ? said : ""),
              state: stateName(status.state),
              detail: completed ? describeCost(costOf(status.message)) : said,
              memory: completed ? memoryOf(status.message) : null,
            };
          }),
        );
        note.textContent = "";
        return;
      }
    } catch (error) {
      note.textContent = `The hub did not list this conversation's turns (${error.message}).`;
    }
    if (local && local.turns.length) {
      showTurns(local.turns);
      note.textContent = `${note.textContent} The turns shown are this browser's copy.`.trim();
    } else {
      showTurns([]);
    }
  };

  const ask = async (text) => {
    const user = bubble("user", text);
    const agent = bubble("agent", "", "submitted");
    transcript.append(user, agent);
    transcript.scrollTop = transcript.scrollHeight;
    const controller = new AbortController();
    setRunning({ taskId: "", controller });
    let answer = "";
    const artifacts = new Map(); // artifact id -> {name, text}, in the order they came
    let state = "submitted";
    let taskId = "";
    let detail = "";
    let memory = null;
    const started = !current;
    // Until the answer is final, the meta line says what happens and for how long: received,
    // then the hub's progress (loading the model, waiting for it, reading), then writing.
    let phase = "received";
    const sentAt = performance.now();
    const paint = () => {
      const seconds = `${((performance.now() - sentAt) / 1000).toFixed(1)} s`;
      agent.set(answer, state, FINAL.has(state) ? detail : [detail || phase, seconds].join(" · "));
    };
    const ticker = setInterval(paint, 500);
    paint();
    try {
      for await (const event of streamMessage(personaId, text, current, controller.signal)) {
        if (event.task) {
          taskId = event.task.id;
          state = stateName(event.task.status && event.task.status.state) || state;
          if (!current) {
            current = event.task.contextId;
            // The address names the conversation (reload resumes it) without a new render.
            history.replaceState(null, "", chatHref(personaId, current));
          }
          setRunning({ taskId, controller });
        } else if (event.artifactUpdate) {
          const update = event.artifactUpdate;
          const artifact = update.artifact || {};
          const piece = textOf(artifact.parts);
          const known = artifacts.get(artifact.artifactId);
          const text = update.append && known ? known.text + piece : piece;
          artifacts.set(artifact.artifactId, { name: artifact.name || (known && known.name), text });
          answer = artifactsText([...artifacts.values()]);
          if (answer) phase = "writing";
        } else if (event.statusUpdate) {
          const status = event.statusUpdate.status || {};
          const said = textOf(status.message && status.message.parts);
          state = stateName(status.state);
          if (progressOf(status.message)) {
            phase = said.charAt(0).toLowerCase() + said.slice(1); // "reading (512 new tokens)"
          } else if (status.state === "TASK_STATE_COMPLETED") {
            answer = answer || said;
            detail = describeCost(costOf(status.message));
            memory = memoryOf(status.message);
          } else if (said) {
            detail = said; // a tool being called, why it failed, that it was canceled
          }
        } else if (event.message) {
          answer = textOf(event.message.parts);
          state = "completed";
        } else if (event.error) {
          state = "failed";
          detail = event.error.message || "error";
        }
        paint();
        transcript.scrollTop = transcript.scrollHeight;
      }
      if (!FINAL.has(state)) {
        detail = "The stream ended before the answer did: open the conversation again to see it.";
        agent.set(answer, state, detail);
      }
    } catch (error) {
      if (error.name !== "AbortError") {
        state = "failed";
        detail = error.message;
        agent.set(answer, state, detail);
      }
    } finally {
      clearInterval(ticker);
      setRunning(null);
    }
    agent.remember(memory);
    if (current) {
      recordTurn(personaId, current, { taskId, user: text, answer, state, detail });
      if (started) renderList();
    }
  };

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || running || !joined) return;
    input.value = "";
    ask(text);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  cancel.addEventListener("click", async () => {
    if (!running || !running.taskId) return;
    cancel.disabled = true;
    try {
      // The stream then ends with the task's canceled status.
      await cancelTask(personaId, running.taskId);
    } catch (error) {
      note.replaceChildren(errorBox(error));
    }
  });

  let personaName = personaId;
  try {
    const agentCard = await card(personaId);
    personaName = agentCard.name || personaId;
    greeting = greetingOf(agentCard);
    head.replaceChildren(
      avatar(personaId, agentCard.name, agentCard, hubUrl),
      el(
        "div",
        {},
        el("h1", { class: "persona-name" }, agentCard.name),
        el("a", { href: `#/edit/${encodeURIComponent(personaId)}` }, "Edit persona"),
      ),
    );
  } catch (error) {
    root.querySelector(".thread").prepend(errorBox(error));
  }
  renderList();
  if (!joined) {
    joined = await confirmDialog(
      `Join the conversation ${current} with ${personaName}? This browser did not start ` +
        "it: it comes from a link, and whoever made the link may read what is said in it.",
      "Join",
    );
    if (!joined) {
      if (root.isConnected) location.hash = chatHref(personaId); // a new conversation
      return null;
    }
    send.disabled = false;
  }
  if (current) await loadTurns();
  else showTurns([]);
  input.focus();

  return {
    // Leaving the page stops reading the stream; the hub finishes the answer, which
    // resuming the conversation shows.
    leave: () => running && running.controller.abort(),
  };
}
