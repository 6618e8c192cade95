// A character card's lists as forms: its alternate greetings (data.alternate_greetings)
// and its lorebook (data.character_book.entries: keys, regex keys, constant, order, depth,
// enabled). An edit rewrites that one member of the card's JSON text; the rest of the text
// stays as written, and each entry keeps the fields the form does not show.

import { valueSpans, withValue } from "./jsontext.js";
import { el } from "./ui.js";

// The text with data.{key} set to value: replaced where the card has it, else added as
// the last member of "data". Null when the text is not a card's JSON.
export function withDataMember(text, key, value) {
  const changed = withValue(text, `data.${key}`, value);
  if (changed !== null) return changed;
  const spans = valueSpans(text);
  const data = spans && spans.get("data");
  if (!data) return null;
  const close = text.lastIndexOf("}", data[1] - 1);
  const inside = text.slice(data[0] + 1, close).trim();
  const member = `${JSON.stringify(key)}: ${JSON.stringify(value, null, 2)}`;
  return `${text.slice(0, close).trimEnd()}${inside ? ", " : ""}${member}${text.slice(close)}`;
}

function cardData(text) {
  try {
    return JSON.parse(text).data || {};
  } catch {
    return {};
  }
}

// The greetings a new conversation may open with besides the first message.
export function greetingsEditor(getText, setText) {
  const section = el("fieldset", { id: "card-greetings", class: "card-list" });
  let greetings = [];
  const write = () => {
    const changed = withDataMember(getText(), "alternate_greetings", greetings);
    if (changed !== null) setText(changed);
  };
  section.refresh = () => {
    const given = cardData(getText()).alternate_greetings;
    greetings = Array.isArray(given) ? given.filter((g) => typeof g === "string") : [];
    const rows = greetings.map((greeting, index) => {
      const input = el("textarea", { class: "greeting", rows: 3, spellcheck: "false", "aria-label": `Greeting ${index + 2}` });
      input.value = greeting;
      input.addEventListener("input", () => {
        greetings[index] = input.value;
        write();
      });
      const remove = el("button", { type: "button", class: "small remove-greeting" }, "Remove");
      remove.addEventListener("click", () => {
        greetings.splice(index, 1);
        write();
        section.refresh();
      });
      return el("div", { class: "card-list-item" }, el("span", {}, `Greeting ${index + 2}`), input, remove);
    });
    const add = el("button", { type: "button", id: "add-greeting", class: "small" }, "Add a greeting");
    add.addEventListener("click", () => {
      greetings.push("");
      write();
      section.refresh();
      const inputs = section.querySelectorAll("textarea.greeting");
      inputs[inputs.length - 1].focus();
    });
    section.replaceChildren(el("legend", {}, "Other greetings (the first message is greeting 1)"), ...rows, add);
  };
  return section;
}

const splitKeys = (value) =>
  value
    .split(",")
    .map((key) => key.trim())
    .filter(Boolean);

function entryForm(entry, index, changed, removed) {
  const field = (label, input) => el("label", { class: "lore-field" }, el("span", {}, label), input);
  const text = (value, attributes = {}) => {
    const input = el("input", { spellcheck: "false", ...attributes });
    input.value = value;
    return input;
  };
  const check = (on, attributes) => el("input", { type: "checkbox", checked: Boolean(on), ...attributes });
  const name = text(entry.comment || entry.name || "", { class: "lore-name" });
  const keys = text((entry.keys || []).join(", "), { class: "lore-keys" });
  const content = el("textarea", { class: "lore-content", rows: 3, spellcheck: "false" });
  content.value = entry.content || "";
  const regex = check(entry.use_regex, { class: "lore-regex" });
  const constant = check(entry.constant, { class: "lore-constant" });
  const enabled = check(entry.enabled !== false, { class: "lore-enabled" });
  const order = text(String(entry.insertion_order ?? 100), { type: "number", class: "lore-order" });
  const extensions = entry.extensions && typeof entry.extensions === "object" ? entry.extensions : {};
  const depth = text(extensions.depth === undefined ? "" : String(extensions.depth), {
    type: "number",
    min: 0,
    class: "lore-depth",
    placeholder: "default",
  });
  const read = () => {
    entry.comment = name.value;
    entry.keys = splitKeys(keys.value);
    entry.content = content.value;
    entry.use_regex = regex.checked;
    entry.constant = constant.checked;
    entry.enabled = enabled.checked;
    entry.insertion_order = Number.parseInt(order.value, 10) || 0;
    const { depth: _old, ...others } = extensions;
    entry.extensions = depth.value.trim() === "" ? others : { ...others, depth: Number.parseInt(depth.value, 10) };
    changed();
  };
  for (const input of [name, keys, content, order, depth]) input.addEventListener("input", read);
  for (const box of [regex, constant, enabled]) box.addEventListener("change", read);
  const remove = el("button", { type: "button", class: "small remove-entry" }, "Remove entry");
  remove.addEventListener("click", removed);
  return el(
    "div",
    { class: "lore-entry card-list-item", dataset: { index: String(index) } },
    field("Name", name),
    field("Keys (comma-separated; with Regex keys, each a /pattern/)", keys),
    field("Content", content),
    el("div", { class: "lore-flags" }, field("Enabled", enabled), field("Constant", constant), field("Regex keys", regex)),
    el("div", { class: "lore-numbers" }, field("Order", order), field("Depth", depth)),
    remove,
  );
}

// The card's lorebook entries, each with its keys, content, flags, order and depth.
export function lorebookEditor(getText, setText) {
  const section = el("fieldset", { id: "card-lorebook", class: "card-list" });
  let book = { entries: [] };
  const write = () => {
    const changed = withDataMember(getText(), "character_book", book);
    if (changed !== null) setText(changed);
  };
  section.refresh = () => {
    const given = cardData(getText()).character_book;
    book = given && typeof given === "object" && !Array.isArray(given) ? given : { entries: [] };
    if (!Array.isArray(book.entries)) book.entries = [];
    const rows = book.entries.map((entry, index) =>
      entryForm(entry, index, write, () => {
        book.entries.splice(index, 1);
        write();
        section.refresh();
      }),
    );
    const add = el("button", { type: "button", id: "add-entry", class: "small" }, "Add an entry");
    add.addEventListener("click", () => {
      const ids = book.entries.map((e) => (Number.isInteger(e.id) ? e.id : 0));
      book.entries.push({
        id: Math.max(0, ...ids) + 1,
        keys: [],
        content: "",
        extensions: {},
        enabled: true,
        insertion_order: 100,
        use_regex: false,
        constant: false,
      });
      write();
      section.refresh();
      const names = section.querySelectorAll(".lore-keys");
      names[names.length - 1].focus();
    });
    section.replaceChildren(el("legend", {}, "Lorebook"), ...rows, add);
  };
  return section;
}
