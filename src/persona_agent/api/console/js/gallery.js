// The gallery: every persona the hub serves (GET /a2a/personas), each with its card.

import { card } from "./a2a.js";
import { getJson, hubUrl } from "./api.js";
import { ACCEPTED, importFiles } from "./importer.js";
import { avatar, el, errorBox, toast } from "./ui.js";

const SHOWN = 120; // tiles rendered at once; a filter or "Show more" reaches the rest
const CARD_FETCHES = 6; // cards fetched at once

function tile(persona) {
  const description = el("p", { class: "description" }, persona.description);
  const skills = el("p", { class: "skills" });
  const picture = el("div", { class: "picture" }, avatar(persona.id, persona.name, null, hubUrl, "large"));
  const item = el(
    "li",
    { class: "persona", dataset: { personaId: persona.id } },
    picture,
    el("div", { class: "body" }, el("h3", { class: "name" }, persona.name), description, skills),
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
    description.textContent = agentCard.description;
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
  let shown = SHOWN;
  const render = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const matching = personas.filter((p) => {
      const text = `${p.id} ${p.name} ${p.description}`.toLowerCase();
      return words.every((word) => text.includes(word));
    });
    const items = matching.slice(0, shown).map(tile);
    grid.replaceChildren(...items);
    count.textContent = `${matching.length} of ${personas.length}`;
    more.hidden = matching.length <= shown;
    fillCards(items);
  };
  const load = async () => {
    try {
      personas = await getJson("a2a/personas");
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
