// What reached the model for an answer (docs/prompt.md): a panel under the answer with its
// prompt by section (the system prompt, the card's fields, the example exchanges, the lore
// entries that fired and the keys that fired them, memory, knowledge, the conversation),
// each section's tokens, and what was cut to fit. The hub keeps it for the conversation's
// owner (REST .../messages/{id}/prompt; .../prompt: the newest answer's). Every text is set
// as text (ui.js el), never parsed as HTML: a card's or a model's markup stays inert.

import { request } from "./api.js";
import { el, errorBox } from "./ui.js";

function promptPath(personaId, contextId, messageId) {
  const base = `api/v1/conversations/${encodeURIComponent(personaId)}/${encodeURIComponent(contextId)}`;
  return messageId ? `${base}/messages/${encodeURIComponent(String(messageId))}/prompt` : `${base}/prompt`;
}

function labelOf(item) {
  if (item.constant) return `${item.label} [constant]`;
  if (item.keys && item.keys.length) return `${item.label} [keys: ${item.keys.join(", ")}]`;
  return String(item.label || "");
}

function itemView(item) {
  const text = [item.text || "", ...(item.attached || [])].filter(Boolean).join(" ");
  const more = item.clipped ? ` … (${item.clipped} more characters not kept)` : "";
  return el(
    "li",
    { class: "prompt-item" },
    el("span", { class: "prompt-label" }, `${labelOf(item)} · ~${item.tokens} tokens`),
    el("pre", { class: "prompt-text" }, text + more),
  );
}

// What was cut to fit: a lore entry over the book's budget, a memory or a passage over
// theirs (with its text), earlier messages, a document cut short.
function cutView(cut) {
  const tokens = typeof cut.tokens === "number" ? ` · ~${cut.tokens} tokens` : "";
  const line = `Cut: ${labelOf(cut)}${tokens}: ${cut.reason}`;
  if (!cut.text) return el("li", { class: "prompt-cut" }, line);
  const more = cut.clipped ? ` … (${cut.clipped} more characters not kept)` : "";
  return el(
    "li",
    { class: "prompt-cut" },
    el("span", { class: "prompt-label" }, line),
    el("pre", { class: "prompt-text" }, cut.text + more),
  );
}

// The record as a panel: a line on the whole, then each section folded.
export function promptPanel(record) {
  const head =
    `${record.model} · ${record.messages} messages · ~${record.tokens} tokens ` +
    `(estimated; the model read ${record.promptTokens})`;
  return el(
    "div",
    { class: "prompt-panel" },
    el("p", { class: "prompt-head" }, head),
    ...record.sections.map((section) =>
      el(
        "details",
        { class: "prompt-section", dataset: { section: section.name } },
        el(
          "summary",
          {},
          `${section.title} · ~${section.tokens} tokens`,
          section.cut.length ? ` · ${section.cut.length} cut` : "",
        ),
        el("ul", {}, ...section.items.map(itemView), ...section.cut.map(cutView)),
      ),
    ),
  );
}

// A button that shows (and hides again) the prompt of an answer under `item`: the answer
// `messageId` of the conversation, or (none) its newest answer's (a panel member's).
export function promptButton(item, personaId, contextId, messageId, label = "Prompt") {
  const button = el(
    "button",
    { type: "button", class: "small show-prompt", title: "What reached the model for this answer", "aria-expanded": "false" },
    label,
  );
  let panel = null;
  button.addEventListener("click", async () => {
    if (panel) {
      panel.remove();
      panel = null;
      button.setAttribute("aria-expanded", "false");
      return;
    }
    button.disabled = true;
    try {
      panel = promptPanel(await (await request(promptPath(personaId, contextId, messageId))).json());
    } catch (error) {
      panel = errorBox(error);
    } finally {
      button.disabled = false;
    }
    item.append(panel);
    button.setAttribute("aria-expanded", "true");
  });
  return button;
}

// The prompts of a panel's answer: a button for each member that answered, under `item`.
export function memberPrompts(item, members) {
  if (!members.length) return null;
  return el(
    "div",
    { class: "turn-actions member-prompts" },
    ...members.map((member) =>
      promptButton(item, member.member, member.contextId, null, `Prompt: ${member.memberName || member.member}`),
    ),
  );
}
