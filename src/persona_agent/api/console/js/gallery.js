// The gallery: every persona the hub serves (GET /a2a/personas), each with its card.

import { card } from "./a2a.js";
import { apiKey, getJson, hubUrl } from "./api.js";
import { ACCEPTED, importFiles } from "./importer.js";
import { avatar, el, errorBox, toast } from "./ui.js";

const SHOWN = 120; // tiles rendered at once; a filter or "Show more" reaches the rest
const CARD_FETCHES = 6; // cards fetched at once

const SUMMARY_CHARS = 200;

// A line about the persona: a card's creator's notes, else the first sentence of its
// description without the bracketed trait lists cards start with ("[Ann's personality: ...]")
// and with {{char}} as its name.
export function summary(description, name, notes) {
  const clean = (text) =>
    String(text || "")
      .replace(/\{\{char\}\}/gi, name)
      .replace(/\{\{user\}\}/gi, "you")
      .replace(/\s+/g, " ")
      .trim();
  const shorten = (text) => (text.length > SUMMARY_CHARS ? `${text.slice(0, SUMMARY_CHARS - 1).trimEnd()}…` : text);
  const noted = clean(notes);
  if (noted) return shorten(noted);
  const text = clean(description);
  const prose = clean(text.replace(/\[[^\]]*\]/g, " ").replace(/\{[^}]*\}/g, " "));
  // A sentence ends at . ! or ? before the end or a space and no lower-case word ("c. 470").
  const sentence = (prose || text).match(/^.*?[.!?](?=$|\s+[^\sa-z0-9])/);
  return shorten(sentence ? sentence[0] : prose || text);
}

// The creator's notes of the cards the hub keeps, by persona id, where the REST API lets
// this tab read them (a keyed hub without a key: none, and no prompt for one).
async function creatorNotes() {
  const notes = new Map();
  const headers = apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
  for (let offset = 0; offset < 5000; offset += 500) {
    let page;
    try {
      const response = await fetch(hubUrl(`api/v1/personas?limit=500&offset=${offset}`), { cache: "no-cache", headers });
      if (!response.ok) break;
      page = await response.json();
    } catch {
      break;
    }
    for (const persona of page.items || []) {
      const card = (persona.extensions || {}).character_card || {};
      const data = card.data && typeof card.data === "object" ? card.data : card;
      if (typeof data.creator_notes === "string" && data.creator_notes.trim()) notes.set(persona.id, data.creator_notes);
    }
    if (offset + 500 >= (page.total || 0)) break;
  }
  return notes;
}

function tile(persona, notes, repeated) {
  const describe = (text, name) => summary(text, name, notes.get(persona.id));
  const description = el("p", { class: "description", title: persona.description }, describe(persona.description, persona.name));
  const skills = el("p", { class: "skills" });
  const picture = el("div", { class: "picture" }, avatar(persona.id, persona.name, null, hubUrl, "large"));
  // Personas of one name are told apart by their ids.
  const shownId = repeated ? el("small", { class: "persona-id" }, persona.id) : null;
  const item = el(
    "li",
    { class: "persona", dataset: { personaId: persona.id } },
    picture,
    el("div", { class: "body" }, el("h3", { class: "name" }, persona.name, shownId), description, skills),
    el(
      "div",
      { class: "actions" },
      el("a", { class: "button primary", href: `#/chat/${encodeURIComponent(persona.id)}` }, "Chat"),
      el("a", { class: "button", href: `#/edit/${encodeURIComponent(persona.id)}` }, "Edit"),
    ),
  );
  // Filled in when the card comes: its picture, its description and skills as of now.
  item.showCard = (agentCard) => {
    picture.replaceChildren(avatar(persona.id, agentCard.name, agentCard, hubUrl, "large"));
    description.textContent = describe(agentCard.description, agentCard.name);
    description.title = agentCard.description;
    const domains = (agentCard.skills || []).filter((skill) => !skill.id.endsWith("-conversation"));
    skills.replaceChildren(...domains.slice(0, 4).map((skill) => el("span", { class: "chip" }, skill.name)));
    item.dataset.cardVersion = agentCard.version || "";
  };
  return item;
}

async function fillCards(items) {
  const queue = [...items];
  const worker = async () => {
    while (queue.length) {
      const item = queue.shift();
      try {
        item.showCard(await card(item.dataset.personaId));
      } catch {
        // the tile keeps what the persona list said
      }
    }
  };
  await Promise.all(Array.from({ length: CARD_FETCHES }, worker));
}

export async function showGallery(root) {
  const grid = el("ul", { id: "persona-grid", class: "grid" });
  const filter = el("input", { id: "persona-filter", type: "search", placeholder: "Filter personas" });
  const fileInput = el("input", { id: "import-input", type: "file", accept: ACCEPTED, multiple: true, hidden: true });
  const importStatus = el("div", { id: "import-status", class: "import-status", "aria-live": "polite" });
  const dropZone = el(
    "div",
    { id: "drop-zone", class: "drop-zone" },
    "Drop persona files or character cards here (YAML, JSON, PNG) to import them, or ",
    el("button", { type: "button", id: "import-button", on: { click: () => fileInput.click() } }, "choose files"),
    ".",
  );
  const more = el("button", { type: "button", id: "show-more", class: "more", hidden: true }, "Show more");
  const count = el("span", { class: "count" });
  root.append(
    el(
      "section",
      { class: "gallery" },
      el(
        "div",
        { class: "toolbar" },
        el("h1", {}, "Personas"),
        count,
        filter,
        el("a", { class: "button primary", href: "#/new" }, "New persona"),
      ),
      dropZone,
      fileInput,
      importStatus,
      grid,
      more,
    ),
  );

  let personas = [];
  let notes = new Map();
  let shown = SHOWN;
  const render = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const matching = personas.filter((p) => {
      const text = `${p.id} ${p.name} ${p.description}`.toLowerCase();
      return words.every((word) => text.includes(word));
    });
    const names = new Map();
    for (const p of personas) names.set(p.name, (names.get(p.name) || 0) + 1);
    const items = matching.slice(0, shown).map((p) => tile(p, notes, names.get(p.name) > 1));
    grid.replaceChildren(...items);
    count.textContent = `${matching.length} of ${personas.length}`;
    more.hidden = matching.length <= shown;
    fillCards(items);
  };
  const load = async () => {
    try {
      [personas, notes] = await Promise.all([getJson("a2a/personas"), creatorNotes()]);
      render();
      grid.dataset.loaded = "true";
    } catch (error) {
      grid.replaceChildren(errorBox(error));
    }
  };
  filter.addEventListener("input", () => {
    shown = SHOWN;
    render();
  });
  more.addEventListener("click", () => {
    shown += SHOWN;
    render();
  });

  const importAll = async (files) => {
    if (!files.length) return;
    importStatus.replaceChildren(el("p", {}, `Importing ${files.length} file(s)…`));
    const results = await importFiles(files);
    importStatus.replaceChildren(
      ...results.map((result) =>
        result.error
          ? el("div", { class: "import-result failed" }, el("strong", {}, result.file.name), errorBox(result.error))
          : el(
              "p",
              { class: "import-result imported", dataset: { personaId: result.persona.id } },
              `Imported ${result.file.name} as `,
              el("a", { href: `#/edit/${encodeURIComponent(result.persona.id)}` }, result.persona.name),
              ` (${result.persona.id}).`,
            ),
      ),
    );
    const imported = results.filter((result) => !result.error).length;
    if (imported) toast(`Imported ${imported} persona(s)`);
    await load();
  };
  fileInput.addEventListener("change", () => {
    importAll([...fileInput.files]);
    fileInput.value = "";
  });
  // The whole gallery takes a drop, the zone shows where.
  const section = root.querySelector(".gallery");
  section.addEventListener("dragover", (event) => {
    event.preventDefault();
    dropZone.classList.add("active");
  });
  section.addEventListener("dragleave", (event) => {
    if (!section.contains(event.relatedTarget)) dropZone.classList.remove("active");
  });
  section.addEventListener("drop", (event) => {
    event.preventDefault();
    dropZone.classList.remove("active");
    importAll([...((event.dataTransfer && event.dataTransfer.files) || [])]);
  });

  await load();
  return {};
}
