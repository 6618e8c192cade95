// A character card's text fields as a form: each field's text as it reads (line breaks as
// lines, not "\r\n"), and an edit changes that field's value in the card's JSON text and
// nothing else of it.

import { greetingsEditor, lorebookEditor } from "./cardlists.js";
import { valueSpans, withValue } from "./jsontext.js";
import { el } from "./ui.js";

const FIELDS = [
  ["name", "Name", 1],
  ["description", "Description", 6],
  ["personality", "Personality", 3],
  ["scenario", "Scenario", 3],
  ["first_mes", "First message (greeting)", 4],
  ["mes_example", "Example messages", 6],
  ["system_prompt", "System prompt", 3],
  ["post_history_instructions", "Post-history instructions", 2],
  ["creator_notes", "Creator's notes", 3],
];

// Whether the text is a V2/V3 character card (its fields then have a form).
export function isCardText(text) {
  try {
    const data = JSON.parse(text);
    return typeof data.spec === "string" && data.spec.startsWith("chara_card") && typeof data.data === "object";
  } catch {
    return false;
  }
}

// The form of the card's text fields, filled from getText(); setText(text) gets the card's
// text with one field changed. form.refresh() fills it again from getText().
export function cardForm(getText, setText) {
  const form = el("div", { id: "card-fields", class: "card-fields" });
  const greetings = greetingsEditor(getText, setText);
  const lorebook = lorebookEditor(getText, setText);
  form.refresh = () => {
    const text = getText();
    const spans = valueSpans(text);
    const data = spans ? JSON.parse(text).data || {} : {};
    const rows = FIELDS.filter(([key]) => spans && spans.has(`data.${key}`) && typeof data[key] === "string").map(
      ([key, label, rows]) => {
        const input =
          rows === 1
            ? el("input", { id: `card-${key}`, value: data[key], spellcheck: "false" })
            : el("textarea", { id: `card-${key}`, rows, spellcheck: "false" });
        input.value = data[key];
        input.addEventListener("input", () => {
          const changed = withValue(getText(), `data.${key}`, input.value);
          if (changed !== null) setText(changed);
        });
        return el("label", { class: "card-field" }, el("span", {}, label), input);
      },
    );
    if (!rows.length) {
      form.replaceChildren(el("p", { class: "note" }, "The card's JSON cannot be read: edit its source."));
      return;
    }
    greetings.refresh();
    lorebook.refresh();
    form.replaceChildren(
      ...rows,
      greetings,
      lorebook,
      el("p", { class: "note" }, "Other fields (tags, extensions): in the source."),
    );
  };
  return form;
}
