// The persona editor: the persona's file as written (YAML, or a character card's JSON,
// whose text fields also show as a form), checked as it is typed by the hub's own
// validator (POST /api/v1/personas/validate), saved as it is (PUT .../file) with the
// version it was read at (If-Match), so two editors never overwrite each other and a
// save changes only what was edited.

import { HttpError, request } from "./api.js";
import { cardForm, isCardText } from "./cardform.js";
import { forgetPersona } from "./conversations.js";
import { documentsSection } from "./documents.js";
import { confirmDialog, el, errorBox, toast } from "./ui.js";

const CHECK_DELAY_MS = 300;

const TEMPLATE = `name: Grace Hopper
description: Computer scientist and US Navy rear admiral who pioneered compilers.
personal_background: |
  Born in New York in 1906, she earned a PhD in mathematics at Yale and joined the
  Navy in 1943, where she programmed the Harvard Mark I.
language_style:
  tone: brisk, witty, practical
  characteristics:
    - uses anecdotes
knowledge_domains:
  Programming languages:
    - compilers
    - COBOL
interaction_samples:
  - user: Why compilers?
    assistant: Because people should be able to write programs in English.
`;

function personaPath(personaId) {
  return `api/v1/personas/${encodeURIComponent(personaId)}`;
}

// A name as a persona id, as the hub makes one of a card's name.
export function slug(name) {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/, "");
}

// Download the persona as a character card (V3; a PNG with the avatar, or JSON).
async function exportCard(personaId, container) {
  const response = await request(`${personaPath(personaId)}/card?as=${container}`);
  const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `${personaId}.${container}` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

// Upload the text as the file "{id}.yaml": stored as it is, as any upload.
function createFrom(personaId, text) {
  const form = new FormData();
  form.append("file", new File([text], `${personaId}.yaml`, { type: "application/yaml" }));
  return request(`api/v1/personas/upload?id=${encodeURIComponent(personaId)}`, {
    method: "POST",
    headers: { "X-Requested-With": "persona-agent-console" },
    body: form,
  });
}

// The hub's verdict on the text as the file "{id}.{fmt}": {valid, problems, persona, exists}.
async function check(personaId, text, fmt) {
  const name = `${personaId || "new-persona"}.${fmt}`;
  const form = new FormData();
  form.append("file", new File([text], name, { type: `application/${fmt}` }));
  const query = personaId ? `?id=${encodeURIComponent(personaId)}` : "";
  // A keyless hub takes a file to check as it takes an upload: with this header.
  const response = await request(`api/v1/personas/validate${query}`, {
    method: "POST",
    headers: { "X-Requested-With": "persona-agent-console" },
    body: form,
  });
  const result = await response.json();
  // Each problem names the file; in the editor the file is the text area.
  result.problems = (result.problems || []).map((problem) =>
    problem.startsWith(`${name}: `) ? problem.slice(name.length + 2) : problem,
  );
  return result;
}

export async function showEditor(root, personaId) {
  const creating = !personaId;
  let fmt = "yaml"; // the file's format: yaml, or json (a card, or a persona in JSON)
  const nameInput = el("input", { id: "persona-name", placeholder: "Grace Hopper", autocomplete: "off" });
  const idInput = el("input", {
    id: "persona-id",
    placeholder: "grace-hopper",
    spellcheck: "false",
    autocomplete: "off",
    "aria-describedby": "id-help",
  });
  let idEdited = false; // until the id is typed, it follows the name
  const text = el("textarea", {
    id: "persona-yaml",
    spellcheck: "false",
    wrap: "off", // YAML's lines are its structure
    "aria-label": "Persona file (YAML)",
  });
  const status = el("p", { id: "validation-status", class: "validation-status" });
  const problems = el("ul", { id: "problems", class: "problems" });
  const panel = el("aside", { id: "validation", class: "validation", dataset: { state: "checking" } }, el("h2", {}, "Checks"), status, problems);
  const save = el("button", { type: "button", id: "save", class: "primary" }, creating ? "Create" : "Save");
  const remove = el("button", { type: "button", id: "delete", class: "danger", hidden: creating }, "Delete");
  const reload = el("button", { type: "button", id: "reload", hidden: true }, "Reload");
  const saveStatus = el("span", { id: "save-status", class: "save-status", "aria-live": "polite" });
  const title = el("h1", {}, creating ? "New persona" : `Edit ${personaId}`);
  const exportPng = el("button", { type: "button", id: "export-png", hidden: creating }, "Export card (PNG)");
  const exportJson = el("button", { type: "button", id: "export-json", hidden: creating }, "Export card (JSON)");
  const exportCharx = el(
    "button",
    { type: "button", id: "export-charx", hidden: creating, title: "A V3 card with its avatar and assets, in a zip" },
    "Export card (CHARX)",
  );
  const fieldsTab = el("button", { type: "button", id: "show-fields", class: "tab", hidden: true }, "Fields");
  const sourceTab = el("button", { type: "button", id: "show-source", class: "tab", hidden: true }, "Source");
  const form = cardForm(
    () => text.value,
    (changed) => {
      text.value = changed;
      scheduleCheck();
    },
  );
  form.hidden = true;
  const links = creating
    ? el(
        "div",
        { class: "new-fields" },
        el("label", { class: "id-field" }, "Name ", nameInput),
        el(
          "label",
          { class: "id-field" },
          "Id ",
          idInput,
          el("small", { id: "id-help" }, " from the name; lower-case letters, digits and dashes: it names the persona's endpoint"),
        ),
      )
    : el("a", { href: `#/chat/${encodeURIComponent(personaId)}` }, "Chat with this persona");
  root.append(
    el(
      "section",
      { class: "editor", dataset: { personaId: personaId || "" } },
      el("div", { class: "toolbar" }, title, links),
      el("div", { class: "tabs" }, fieldsTab, sourceTab),
      el("div", { class: "editor-body" }, el("div", { class: "editor-text" }, form, text), panel),
      el("div", { class: "editor-actions" }, save, remove, reload, exportPng, exportJson, exportCharx, saveStatus),
    ),
  );

  // A card's fields as a form, or its JSON text; YAML has only its text.
  const showForm = (on) => {
    if (on) form.refresh();
    form.hidden = !on;
    text.hidden = on;
    fieldsTab.classList.toggle("current", on);
    sourceTab.classList.toggle("current", !on);
  };
  const setFormat = (value) => {
    fmt = value;
    text.setAttribute("aria-label", fmt === "json" ? "Persona file (JSON)" : "Persona file (YAML)");
    const card = fmt === "json" && isCardText(text.value);
    fieldsTab.hidden = sourceTab.hidden = !card;
    showForm(card);
  };
  fieldsTab.addEventListener("click", () => showForm(true));
  sourceTab.addEventListener("click", () => showForm(false));

  let etag = "";
  let checking = 0; // the latest check; an older answer is ignored
  let timer = 0;
  let last = null; // the latest check's result

  const currentId = () => (creating ? idInput.value.trim() : personaId);

  const showCheck = (result, extra = []) => {
    const all = [...extra, ...result.problems];
    if (creating && result.valid && result.exists) {
      all.push(`id: a persona '${result.id}' exists already`);
    }
    problems.replaceChildren(...all.map((problem) => el("li", {}, problem)));
    const ok = all.length === 0;
    panel.dataset.state = ok ? "valid" : "invalid";
    status.textContent = ok ? "Valid: ready to save." : `${all.length} problem(s):`;
    save.disabled = !ok;
    return ok;
  };

  const runCheck = async () => {
    const ticket = ++checking;
    panel.dataset.state = "checking";
    status.textContent = "Checking…";
    try {
      const result = await check(currentId(), text.value, fmt);
      if (ticket !== checking) return null;
      last = result;
      const extra = creating && !currentId() ? ["id: required"] : [];
      return showCheck(result, extra) ? result : null;
    } catch (error) {
      if (ticket === checking) {
        panel.dataset.state = "error";
        status.replaceChildren(errorBox(error));
        problems.replaceChildren();
      }
      return null;
    }
  };

  const scheduleCheck = () => {
    clearTimeout(timer);
    checking += 1; // an answer to an earlier check is stale now
    panel.dataset.state = "checking";
    status.textContent = "Checking…";
    save.disabled = true;
    saveStatus.textContent = creating ? "" : "Unsaved changes";
    timer = setTimeout(runCheck, CHECK_DELAY_MS);
  };

  const load = async () => {
    if (creating) {
      text.value = TEMPLATE;
      nameInput.value = "Grace Hopper";
      idInput.value = slug(nameInput.value);
      return;
    }
    const response = await request(`${personaPath(personaId)}/file`, {
      headers: { Accept: "application/yaml, application/json" },
    });
    etag = response.headers.get("ETag") || "";
    text.value = await response.text();
    setFormat((response.headers.get("Content-Type") || "").includes("json") ? "json" : "yaml");
    text.setSelectionRange(0, 0); // the top of the file, where focus() scrolls to
    saveStatus.textContent = "";
    reload.hidden = true;
  };

  const saveNow = async () => {
    clearTimeout(timer);
    save.disabled = true;
    saveStatus.textContent = "Saving…";
    const result = await runCheck();
    if (!result) {
      saveStatus.textContent = "Not saved: see the problems.";
      return;
    }
    try {
      if (creating) {
        await createFrom(result.id, text.value);
        toast(`Created ${result.persona.name}`);
        location.hash = `#/edit/${encodeURIComponent(result.id)}`;
        return;
      }
      // The text as it is: the hub keeps it byte for byte (comments, order, layout).
      const headers = { "Content-Type": `application/${fmt}` };
      if (etag) headers["If-Match"] = etag;
      const body = text.value;
      const response = await request(`${personaPath(personaId)}/file`, { method: "PUT", headers, body });
      etag = response.headers.get("ETag") || "";
      const saved = await response.json();
      saveStatus.textContent = `Saved (version ${saved.version}).`;
      toast(`Saved ${saved.name}`);
    } catch (error) {
      if (error instanceof HttpError && error.status === 412) {
        saveStatus.textContent =
          "Not saved: someone changed this persona since you opened it. Reload to see their version (your text is lost), or copy your text first.";
        reload.hidden = false;
      } else {
        saveStatus.replaceChildren(errorBox(error));
      }
    } finally {
      save.disabled = !(last && last.valid);
    }
  };

  const deleteNow = async () => {
    const sure = await confirmDialog(
      `Delete the persona '${personaId}'? Its tasks and conversations are deleted with it.`,
      "Delete",
    );
    if (!sure) return;
    try {
      await request(personaPath(personaId), { method: "DELETE", headers: etag ? { "If-Match": etag } : {} });
      forgetPersona(personaId);
      toast(`Deleted ${personaId}`);
      location.hash = "#/";
    } catch (error) {
      if (error instanceof HttpError && error.status === 412) {
        saveStatus.textContent = "Not deleted: someone changed this persona since you opened it. Reload first.";
        reload.hidden = false;
      } else {
        saveStatus.replaceChildren(errorBox(error));
      }
    }
  };

  text.addEventListener("input", scheduleCheck);
  idInput.addEventListener("input", () => {
    idEdited = idInput.value.trim() !== "";
    scheduleCheck();
  });
  // The name goes into the file's "name:" line, and into the id until that is typed.
  nameInput.addEventListener("input", () => {
    const name = nameInput.value.replace(/\s+/g, " ").trim();
    text.value = text.value.replace(/^name:.*$/m, `name: ${JSON.stringify(name)}`);
    if (!idEdited) idInput.value = slug(name);
    scheduleCheck();
  });
  const exporting = (container) => async () => {
    try {
      await exportCard(personaId, container);
    } catch (error) {
      saveStatus.replaceChildren(errorBox(error));
    }
  };
  exportPng.addEventListener("click", exporting("png"));
  exportJson.addEventListener("click", exporting("json"));
  exportCharx.addEventListener("click", exporting("charx"));
  text.addEventListener("keydown", (event) => {
    // Tab indents (YAML is indented with spaces) instead of leaving the text area.
    if (event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.altKey) {
      event.preventDefault();
      text.setRangeText("  ", text.selectionStart, text.selectionEnd, "end");
      scheduleCheck();
    }
  });
  save.addEventListener("click", saveNow);
  remove.addEventListener("click", deleteNow);
  reload.addEventListener("click", async () => {
    await load();
    await runCheck();
  });

  try {
    await load();
  } catch (error) {
    root.querySelector(".editor-body").replaceChildren(errorBox(error));
    save.disabled = true;
    remove.disabled = true;
    return {};
  }
  await runCheck();
  if (!creating) {
    const documents = documentsSection(personaId);
    root.querySelector(".editor").append(documents.section);
    await documents.refresh();
  }
  (creating ? nameInput : form.hidden ? text : form.querySelector("input, textarea") || text).focus();
  return { leave: () => clearTimeout(timer) };
}
