// The transcript's bubbles: a user message (with its attachments), an answer (its text,
// how it ended, its cost, what memory did for it, its voice), the greeting; and the turns
// of a conversation read back from its A2A tasks.

import { costOf, memoryOf, stateName, textOf } from "./a2a.js";
import { attachmentsRow, shownOfA2A } from "./attachments.js";
import { renderInto } from "./markup.js";
import { el } from "./ui.js";
import { audioBlobs, voicePlayer, VOICE_ARTIFACT } from "./voice.js";

// The text of a turn's artifacts: a persona's one "answer" as it is; a panel's answers (one
// artifact per member's turn, named after the member) each under its name.
export function artifactsText(artifacts) {
  const shown = artifacts.filter((a) => a.text);
  if (shown.length === 1 && shown[0].name === "answer") return shown[0].text;
  return shown.map((a) => (a.name && a.name !== "answer" ? `${a.name}\n${a.text}` : a.text)).join("\n\n");
}

// A price as people read it: "free" for a model that costs nothing (the embedded one),
// cents to four places, and a tiny price in significant digits rather than "$0.0000".
export function priceText(usd) {
  if (usd === 0) return "free";
  if (usd < 0.0001) return `$${usd.toPrecision(2)}`;
  return `$${usd.toFixed(4)}`;
}

export function describeCost(cost) {
  if (!cost) return "";
  const parts = [];
  if (cost.usage && cost.usage.totalTokens) parts.push(`${cost.usage.totalTokens} tokens`);
  if (cost.durationMs) parts.push(`${(cost.durationMs / 1000).toFixed(1)} s`);
  if (typeof cost.costUsd === "number") parts.push(priceText(cost.costUsd));
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

// Whether a status message is the hub's report of what the model does before it writes.
export function progressOf(message) {
  return ((message && message.parts) || []).some((part) => part.data && part.data.kind === "progress");
}

const KINDS = { user: "user", agent: "answer", "agent greeting": "greeting" };

// One bubble of the transcript; set(text, state, detail) changes it as events come, and
// remember(memory) adds what memory did for it, attach(shown) the message's attachments
// (attachments.js), voice() the answer's player (voice.js, made once). Its data-kind (user, answer, greeting)
// and its `source` (the text as written) say which turn of a stored conversation it shows.
// The text is shown rendered (markup.js): a growing answer at most once a frame.
export function bubble(role, text, state = "") {
  const body = el("div", { class: "text" });
  const meta = el("div", { class: "meta" });
  const item = el("li", { class: `turn ${role}`, dataset: { state, kind: KINDS[role] } }, body, meta);
  let frame = 0;
  const show = (source) => {
    item.source = source;
    if (frame) return;
    if (document.hidden) renderInto(body, source); // no frames come to a hidden page
    else {
      frame = requestAnimationFrame(() => {
        frame = 0;
        renderInto(body, item.source);
      });
    }
  };
  item.source = text;
  renderInto(body, text);
  item.set = (newText, newState, detail = "") => {
    if (newText !== null && newText !== item.source) show(newText);
    if (newState !== null) item.dataset.state = newState;
    const shownState = role === "agent" && newState && newState !== "completed" ? newState : "";
    meta.textContent = [shownState, detail].filter(Boolean).join(" · ");
  };
  item.remember = (memory) => {
    const note = rememberedNote(memory);
    if (note) item.append(note);
  };
  item.attach = (shown) => {
    const old = item.querySelector(":scope > .attachments");
    if (old) old.remove();
    const row = attachmentsRow(shown || []);
    if (row) item.insertBefore(row, body);
  };
  let player = null;
  item.voice = () => {
    if (!player) {
      player = voicePlayer();
      meta.before(player.element);
    }
    return player;
  };
  if (state && role === "agent") item.set(null, state);
  return item;
}

// A conversation's turns from its A2A tasks (ListTasks of the context): what a panel's
// conversation, or a hub without the conversations API, is read back from.
export function turnsOfTasks(tasks) {
  return tasks.map((task) => {
    const user = (task.history || []).find((m) => m.role === "ROLE_USER");
    const artifacts = task.artifacts || [];
    const answer = artifactsText(artifacts.map((a) => ({ name: a.name, text: textOf(a.parts) })));
    const voice = artifacts.filter((a) => a.name === VOICE_ARTIFACT).flatMap((a) => audioBlobs(a.parts));
    const status = task.status || {};
    const said = textOf(status.message && status.message.parts);
    const completed = status.state === "TASK_STATE_COMPLETED";
    return {
      user: user ? textOf(user.parts) : "",
      attachments: user ? shownOfA2A(user.parts) : [],
      voice,
      answer: answer || (completed ? said : ""),
      state: stateName(status.state),
      detail: completed ? describeCost(costOf(status.message)) : said,
      memory: completed ? memoryOf(status.message) : null,
    };
  });
}

// Whether a failed task's reason is the hub's for a turn it stopped in the middle of (a
// restart, a crash): "send the message again" (hub/a2a_parts.py's UNFINISHED_REASON).
const LOST = /send the message again/i;

// A2A file parts as the Files they were (a lost turn's, sent again as they came).
function filesOf(parts) {
  return (parts || [])
    .filter((part) => typeof part.raw === "string")
    .map((part) => {
      const bytes = Uint8Array.from(atob(part.raw), (char) => char.charCodeAt(0));
      return new File([bytes], part.filename || "file", { type: part.mediaType || "" });
    });
}

// The turns lost to a hub that stopped while it answered them, after the last answer
// that completed (a lost turn the conversation went on past is history): each as
// {text, files, reason}, to show with a button that sends it again.
export function lostTurnsOf(tasks) {
  const completed = tasks.map((task) => (task.status || {}).state).lastIndexOf("TASK_STATE_COMPLETED");
  return tasks.slice(completed + 1).flatMap((task) => {
    const status = task.status || {};
    const reason = textOf(status.message && status.message.parts);
    const user = (task.history || []).find((m) => m.role === "ROLE_USER");
    if (status.state !== "TASK_STATE_FAILED" || !LOST.test(reason) || !user) return [];
    return [{ text: textOf(user.parts), files: filesOf(user.parts), reason }];
  });
}
