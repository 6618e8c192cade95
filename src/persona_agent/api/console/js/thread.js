// The transcript of a stored conversation, as the hub keeps it (REST), each turn with its
// actions: ‹ 2/3 › between an answer's alternatives, regenerate and continue on the last
// answer, edit in place, fork, delete; and on each answer, the prompt that made it.
//
// Showing a conversation again keeps the bubbles whose turn did not change (an answer
// just streamed keeps its cost line and its Remembered note) and replaces the others. A
// conversation read back shows, under each answer still as its task gave it, the task's
// cost line and Remembered note (`known`: the turns of the context's tasks).

import { bubble, describeCost } from "./bubbles.js";
import { editInPlace, operations, readConversation, turnActions, turnsOf } from "./branches.js";
import { promptButton } from "./promptview.js";
import { confirmDialog, errorBox } from "./ui.js";

const ROLES = { user: "user", answer: "agent", greeting: "agent greeting" };

// `context()`: the conversation's contextId; `busy(flag)`: the composer waits while an
// operation runs; `forked(conversation)`: open a new conversation made by a fork;
// `greeting()`: the card's greeting, shown when the stored conversation has none;
// `idle()`: whether no answer is being written (an operation waits for it to end).
export function storedThread({ transcript, note, personaId, context, busy, forked, greeting, idle }) {
  let working = false;
  let view = null;

  const act = async (name, ...args) => {
    if (working || !idle()) return;
    if (name === "remove" && !(await confirmDialog("Delete this message from the conversation?", "Delete"))) return;
    working = true;
    busy(true);
    note.replaceChildren();
    const answers = transcript.querySelectorAll('.turn[data-kind="answer"]');
    const turns = transcript.querySelectorAll(".turn");
    // A message left unanswered gets its first answer: no earlier answer is replaced.
    const unanswered = turns.length && turns[turns.length - 1].dataset.kind === "user";
    const last = unanswered ? null : answers[answers.length - 1];
    const waiting = name === "regenerate" || name === "continue";
    const doing = name === "regenerate" ? "writing another answer" : "continuing";
    if (waiting && last) last.set(null, "working", doing);
    // The answer shows as it is written: a new one in place of the last, or the last one growing.
    const before = last ? last.source : "";
    let written = name === "continue" ? before : "";
    const onText = (piece) => {
      written += piece;
      if (last) last.set(written, "working", doing);
    };
    try {
      const result = await operations[name](personaId, context(), ...(waiting ? [onText] : args));
      if (name === "fork") forked(result);
      else if (waiting) {
        show(result.conversation);
        // Its tokens and time, as a first answer's (the turn's cost-v1).
        const now = transcript.querySelectorAll('.turn[data-kind="answer"]');
        const answer = now[now.length - 1];
        if (answer && result.cost) answer.set(null, "completed", describeCost(result.cost));
      } else show(result);
    } catch (error) {
      note.replaceChildren(errorBox(error));
      if (waiting && last) last.set(before, "completed");
    } finally {
      working = false;
      busy(false);
    }
  };

  const edit = async (item, turn) => {
    if (working || !idle()) return;
    const text = await editInPlace(item, turn.own);
    if (text === null || text === turn.own) return;
    await act("edit", turn.id, text);
  };

  const show = (conversation, known = []) => {
    view = conversation;
    const unused = known.filter((turn) => turn.state === "completed");
    const turns = turnsOf(conversation);
    const opening = greeting();
    if (opening && !(turns.length && turns[0].kind === "greeting")) {
      turns.unshift({ kind: "greeting", id: null, text: opening, own: opening });
    }
    const shown = [...transcript.children];
    turns.forEach((turn, index) => {
      let item = shown[index];
      if (!(item && item.dataset.kind === turn.kind && item.source === turn.text)) {
        const fresh = bubble(ROLES[turn.kind], turn.text, turn.kind === "user" ? "" : "completed");
        const index = turn.kind === "answer" ? unused.findIndex((task) => task.answer === turn.text) : -1;
        if (index >= 0) {
          const [task] = unused.splice(index, 1);
          if (task.detail) fresh.set(null, "completed", task.detail);
          fresh.remember(task.memory);
          if (task.voice && task.voice.length) fresh.voice().add(task.voice, false);
        }
        if (turn.attachments) fresh.attach(turn.attachments);
        if (item) item.replaceWith(fresh);
        else transcript.append(fresh);
        item = fresh;
      } else if (item.dataset.state === "working") {
        item.set(null, "completed");
      }
      if (turn.attachments && turn.attachments.length && !item.querySelector(":scope > .attachments")) {
        item.attach(turn.attachments);
      }
      item.dataset.messageId = turn.id === null ? "" : String(turn.id);
      const old = item.querySelector(".turn-actions");
      if (old) old.remove();
      if (turn.id !== null || turn.last || turn.swipes) {
        const actions = turnActions(turn, act, () => edit(item, turn));
        if (turn.kind === "answer" && turn.id !== null) {
          actions.append(promptButton(item, personaId, context(), turn.id)); // what reached the model
        }
        item.append(actions);
      }
    });
    for (const extra of shown.slice(turns.length)) extra.remove();
    transcript.scrollTop = transcript.scrollHeight;
  };

  return {
    show,
    refresh: async () => show(await readConversation(personaId, context())),
    get view() {
      return view;
    },
  };
}
