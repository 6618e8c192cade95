// A conversation with one persona, streamed through its A2A HTTP+JSON endpoint.
//
// #/chat/{id} starts a new conversation; #/chat/{id}/{contextId} resumes one: its turns
// are read back from the hub (the stored conversation, REST /api/v1/conversations; a
// panel's from ListTasks of that context) and the next message is sent with the same
// contextId, which the hub continues with the conversation's history. The stored
// conversation's turns carry their actions (thread.js): swipes, regenerate, continue,
// edit, fork, delete. A message may carry images and files (attachments.js), and an
// answer may be spoken (voice.js). A persona with alternate greetings lets a new conversation choose
// the one it opens with.
// A contextId this browser does not know (a link from someone else) is joined only once
// the user says so: without keys, whoever knows a contextId reads the conversation.

import {
  cancelTask,
  card,
  conversationTasks,
  costOf,
  greetingsOf,
  isPanel,
  memoryOf,
  stateName,
  streamMessage,
  textOf,
  CONVERSATION_EXTENSION,
  USER_EXTENSION,
} from "./a2a.js";
import { apiKey, hubUrl } from "./api.js";
import { composerAttachments, fileParts, shownOfFile } from "./attachments.js";
import { readConversation, swipeControl, userPersona } from "./branches.js";
import { artifactsText, bubble, describeCost, lostTurnsOf, progressOf, turnsOfTasks } from "./bubbles.js";
import { conversation, conversationsOf, forget, recordTurn, remember } from "./conversations.js";
import { intakeOf } from "./intake.js";
import { memberPrompts } from "./promptview.js";
import { anonymousMemoryNote, memoryState } from "./memory.js";
import { storedThread } from "./thread.js";
import { avatar, confirmDialog, el, errorBox } from "./ui.js";
import { userPersonaDialog } from "./userpersona.js";
import { AUDIO_MODES, audioBlobs, speaks, voiceToggle, VOICE_ARTIFACT } from "./voice.js";

// The states after which a stream has nothing more to say about its task.
const PANEL_METADATA = "persona-agent/panel"; // a panel member's artifact: who, and its conversation
const FINAL = new Set(["completed", "failed", "canceled", "rejected", "input required", "auth required"]);

function chatHref(personaId, contextId) {
  const base = `#/chat/${encodeURIComponent(personaId)}`;
  return contextId ? `${base}/${encodeURIComponent(contextId)}` : base;
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
  const you = el("button", { type: "button", id: "user-persona", class: "small", title: "Who you are to the persona" }, "You: User");
  const memoryLink = el("a", { id: "memory-link", class: "small", href: `#/memory/${encodeURIComponent(personaId)}` }, "What it remembers of you");
  const memoryNote = el("p", { id: "memory-note", class: "note", hidden: true });
  const composer = el("form", { id: "composer", class: "composer" });
  const attachments = composerAttachments(composer, input);
  const voice = voiceToggle();
  voice.offer(false); // until the card says the persona speaks
  const hint = el("span", { id: "attach-hint", class: "attach-hint", hidden: true });
  let intake = intakeOf(null, personaId); // until the card says what the persona takes
  composer.append(
    attachments.previews,
    attachments.notice,
    el("div", { class: "composer-row" }, input, el("div", { class: "buttons" }, send, cancel)),
    el("div", { class: "composer-tools" }, attachments.button, attachments.input, voice.button, hint),
  );
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
        you,
        memoryLink,
        sidebarToggle,
        el("a", { class: "button primary", id: "new-conversation", href: chatHref(personaId) }, "New conversation"),
        el("h2", {}, "Conversations"),
        list,
      ),
      el("div", { class: "thread" }, memoryNote, transcript, note, composer),
    ),
  );

  let current = contextId || "";
  let running = null; // {taskId, controller} while an answer streams
  let greetings = []; // the card's greeting, then its alternate greetings
  let picked = 0; // the greeting a new conversation opens with
  let panel = false; // a panel's turns come from its tasks, without actions
  let pendingUser = null; // who the user is in a conversation not started yet
  let savedUser = null; // the caller's saved user persona, if the hub keeps one
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

  const setBusy = (value) => {
    send.disabled = value || !joined;
  };

  const thread = storedThread({
    transcript,
    note,
    personaId,
    context: () => current,
    busy: setBusy,
    idle: () => !running,
    greeting: () => greetings[0] || "",
    forked: (made) => {
      const first = (made.messages || []).find((m) => m.role === "user");
      remember(personaId, made.context_id, `Fork: ${first ? first.content : made.context_id}`);
      location.hash = chatHref(personaId, made.context_id);
    },
  });

  const showYou = () => {
    const user = (thread.view && thread.view.user) || pendingUser || savedUser;
    you.textContent = `You: ${(user && user.name) || "User"}`;
  };

  // A new conversation's greeting: ‹ 1/3 › chooses among the card's greetings.
  const greetingBubble = () => {
    const item = bubble("agent greeting", greetings[picked], "completed");
    if (greetings.length > 1 && !panel) {
      const pick = (k) => {
        picked = k;
        item.replaceWith(greetingBubble());
      };
      const row = el("div", { class: "turn-actions greeting-picker" }, swipeControl(picked, greetings.length, pick));
      item.append(row);
    }
    return item;
  };

  const showTurns = (turns) => {
    transcript.replaceChildren();
    if (greetings.length) transcript.append(current ? bubble("agent greeting", greetings[0], "completed") : greetingBubble());
    for (const turn of turns) {
      const mine = bubble("user", turn.user);
      mine.attach(turn.attachments);
      transcript.append(mine);
      const answer = bubble("agent", turn.answer, turn.state);
      if (turn.detail) answer.set(null, turn.state, turn.detail);
      if (turn.memory) answer.remember(turn.memory);
      if (turn.voice && turn.voice.length) answer.voice().add(turn.voice, false);
      transcript.append(answer);
    }
    transcript.scrollTop = transcript.scrollHeight;
  };

  // A resumed conversation's turns: the hub's stored conversation (a panel's: the tasks of
  // the context), else this browser's copy.
  const loadTurns = async () => {
    const local = conversation(personaId, current);
    if (!panel) {
      try {
        const tasks = conversationTasks(personaId, current).catch(() => []);
        const stored = await readConversation(personaId, current);
        const known = await tasks;
        thread.show(stored, turnsOfTasks(known));
        note.textContent = "";
        showLost(lostTurnsOf(known));
        showYou();
        return;
      } catch {
        // a hub without the conversations API: its tasks, below
      }
    }
    try {
      const tasks = await conversationTasks(personaId, current);
      if (tasks.length) {
        showTurns(turnsOfTasks(tasks));
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

  // A turn the hub lost when it stopped (its task failed, "send the message again"): shown
  // under the conversation with the reason and a button that sends it again as it was.
  const showLost = (lost) => {
    for (const turn of lost) {
      const last = transcript.lastElementChild;
      const shown = last && last.dataset.kind === "user" && last.source === turn.text;
      const mine = shown ? null : bubble("user", turn.text);
      if (mine) mine.attach(turn.files.map(shownOfFile));
      const failed = bubble("agent", "", "failed");
      failed.dataset.lost = "true";
      failed.set(null, "failed", turn.reason);
      const again = el("button", { type: "button", class: "small primary send-again" }, "Send again");
      again.addEventListener("click", () => {
        if (running || !joined || send.disabled) return;
        if (mine) mine.remove();
        failed.remove();
        ask(turn.text, turn.files);
      });
      failed.append(el("div", { class: "turn-actions" }, again));
      transcript.append(...(mine ? [mine] : []), failed);
    }
    transcript.scrollTop = transcript.scrollHeight;
  };

  // A message the hub refused (a 4xx, a failed turn) goes back into the composer as it
  // was: its text and its files, for the user to change and send again.
  const giveBack = (text, files) => {
    if (text && !input.value.includes(text)) input.value = input.value ? `${text}\n${input.value}` : text;
    if (files.length) attachments.restore(files);
    note.textContent = "Your message was not taken: it is back in the message field.";
  };

  const ask = async (text, files = []) => {
    if (note.textContent.startsWith("Your message was not taken")) note.textContent = "";
    for (const picker of transcript.querySelectorAll(".greeting-picker")) picker.remove();
    const user = bubble("user", text);
    user.attach(files.map(shownOfFile));
    const agent = bubble("agent", "", "submitted");
    transcript.append(user, agent);
    transcript.scrollTop = transcript.scrollHeight;
    const controller = new AbortController();
    setRunning({ taskId: "", controller });
    let answer = "";
    const artifacts = new Map(); // artifact id -> {name, text}, in the order they came
    const members = new Map(); // a panel's: member id -> {member, memberName, contextId}
    let state = "submitted";
    let taskId = "";
    let detail = "";
    let memory = null;
    const started = !current || !conversation(personaId, current); // not listed yet
    // A new conversation's chosen greeting and who the user is go with its first message.
    const metadata = current ? null : {};
    if (metadata && picked && !panel) metadata[CONVERSATION_EXTENSION] = { greeting: picked };
    const firstUser = pendingUser || (apiKey() ? null : savedUser); // the browser's, if anonymous
    if (metadata && firstUser) metadata[USER_EXTENSION] = firstUser;
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
      const given = metadata && Object.keys(metadata).length ? metadata : null;
      const options = { metadata: given, files: await fileParts(files), accepted: voice.on ? AUDIO_MODES : null };
      for await (const event of streamMessage(personaId, text, current, controller.signal, options)) {
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
          if (artifact.name === VOICE_ARTIFACT) {
            agent.voice().add(audioBlobs(artifact.parts)); // played as it comes
            continue;
          }
          const member = (artifact.metadata || {})[PANEL_METADATA];
          if (member && member.member && member.contextId) members.set(member.member, member);
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
        if (state === "failed" || state === "rejected") detail = intake.plain(detail);
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
        detail = intake.plain(error.message);
        agent.set(answer, state, detail);
      }
    } finally {
      clearInterval(ticker);
      setRunning(null);
    }
    if (state === "failed" || state === "rejected") giveBack(text, files);
    agent.remember(memory);
    if (panel && current && members.size) {
      const prompts = memberPrompts(agent, [...members.values()]); // each member's prompt
      if (prompts) agent.append(prompts);
    }
    if (current) {
      const named = files.map((file) => `[${file.name}]`).join(" ");
      recordTurn(personaId, current, { taskId, user: [text, named].filter(Boolean).join(" "), answer, state, detail });
      if (started) renderList();
    }
    // The stored conversation again: the turns' ids and actions (not after a failed or
    // canceled answer, whose bubble says what happened).
    if (current && !panel && state === "completed") {
      try {
        await thread.refresh();
        showYou();
      } catch {
        // a hub without the conversations API: the turns stay as they are, without actions
      }
    }
  };

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!(text || attachments.count) || running || !joined || send.disabled) return;
    input.value = "";
    ask(text, attachments.take());
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
    greetings = greetingsOf(agentCard);
    intake = intakeOf(agentCard, personaName);
    attachments.takes(intake.check, intake.accept);
    hint.textContent = intake.hint;
    hint.hidden = !intake.hint;
    panel = isPanel(agentCard);
    voice.offer(speaks(agentCard));
    you.hidden = panel;
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
  you.addEventListener("click", async () => {
    const known = (thread.view && current && thread.view.user) || pendingUser || savedUser;
    await userPersonaDialog(known, async (user) => {
      if (!current) {
        pendingUser = user; // sent when the conversation starts
        return;
      }
      if (user) await userPersona.saveFor(personaId, current, user);
      else await userPersona.forgetFor(personaId, current);
      await thread.refresh();
    });
    savedUser = await userPersona.savedQuietly();
    showYou();
  });
  memoryState().then((state) => {
    memoryNote.textContent = anonymousMemoryNote(state, personaName);
    memoryNote.hidden = !memoryNote.textContent;
  });
  userPersona.savedQuietly().then((user) => {
    savedUser = user;
    showYou();
  });
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
