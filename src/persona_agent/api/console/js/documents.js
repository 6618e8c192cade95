// A persona's knowledge documents, under its editor: listed, uploaded and deleted through
// the REST API (GET, POST and DELETE /api/v1/personas/{id}/documents; docs/knowledge.md).
// Documents attached to one conversation over A2A are not the persona's: not listed here.

import { request } from "./api.js";
import { confirmDialog, el, errorBox, toast } from "./ui.js";

const ACCEPTED = ".txt,.text,.md,.markdown,.html,.htm,.pdf";

function documentsPath(personaId) {
  return `api/v1/personas/${encodeURIComponent(personaId)}/documents`;
}

// Where a document came from, in words (the REST API's "source").
const SOURCES = { upload: "uploaded", directory: "from the documents folder" };

function passages(count) {
  return `${count} passage${count === 1 ? "" : "s"}`;
}

function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

// Upload one file; a refused one throws the hub's message, which names the file.
function upload(personaId, file) {
  const form = new FormData();
  form.append("file", file, file.name);
  // A keyless hub takes an upload from this machine with this header (docs/api.md).
  return request(documentsPath(personaId), {
    method: "POST",
    headers: { "X-Requested-With": "persona-agent-console" },
    body: form,
  });
}

// The section: a list of the documents (name, source, passages, size, Delete) and a
// file chooser that uploads each chosen file in turn.
export function documentsSection(personaId) {
  const list = el("ul", { id: "documents", class: "documents" });
  const status = el("div", { id: "documents-status", class: "save-status", "aria-live": "polite" });
  const input = el("input", { id: "document-input", type: "file", accept: ACCEPTED, multiple: true, hidden: true });
  const choose = el("button", { type: "button", id: "document-upload", on: { click: () => input.click() } }, "Add documents");
  const section = el(
    "section",
    { class: "documents-section", dataset: { state: "loading" } },
    el("h2", {}, "Documents"),
    el("p", { class: "note" }, "Text, Markdown, HTML or PDF: the passages relevant to each message go into the persona's prompt, and its answers cite them."),
    list,
    el("div", { class: "editor-actions" }, choose, input, status),
  );

  const row = (doc) =>
    el(
      "li",
      { dataset: { documentId: doc.id } },
      el("span", { class: "document-name" }, doc.name),
      el(
        "span",
        { class: "document-facts" },
        ` ${passages(doc.chunks)}, ${size(doc.bytes)}, ${SOURCES[doc.source] || doc.source}`,
      ),
      el("button", { type: "button", class: "danger document-delete", on: { click: () => remove(doc) } }, "Delete"),
    );

  const refresh = async () => {
    try {
      const listed = await (await request(documentsPath(personaId))).json();
      list.replaceChildren(...listed.documents.map(row));
      if (listed.documents.length === 0) list.append(el("li", { class: "empty" }, "No documents."));
      section.dataset.state = "ready";
    } catch (error) {
      status.replaceChildren(errorBox(error));
      section.dataset.state = "error";
    }
  };

  const remove = async (doc) => {
    if (!(await confirmDialog(`Delete the document '${doc.name}' of ${personaId}?`, "Delete"))) return;
    section.dataset.state = "loading";
    status.replaceChildren();
    try {
      await request(`${documentsPath(personaId)}/${encodeURIComponent(doc.id)}`, { method: "DELETE" });
      toast(`Deleted ${doc.name}`);
    } catch (error) {
      status.replaceChildren(errorBox(error));
    }
    await refresh();
  };

  input.addEventListener("change", async () => {
    const files = [...input.files];
    input.value = "";
    section.dataset.state = "loading";
    const problems = [];
    for (const file of files) {
      status.textContent = `Reading ${file.name}…`;
      try {
        const taken = await (await upload(personaId, file)).json();
        toast(`Added ${taken.name} (${passages(taken.chunks)})`);
      } catch (error) {
        problems.push(error);
      }
    }
    status.replaceChildren(...problems.map(errorBox));
    await refresh();
  });

  return { section, refresh };
}
