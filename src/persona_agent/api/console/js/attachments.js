// Files and images attached to a message: chosen with the composer's button, dropped on
// the composer or pasted into it, shown as removable previews until sent, sent as A2A file
// parts (inline bytes, mediaType, filename: docs/media.md), and shown in the transcript as
// thumbnails (images) and chips (name and size) -- also when a conversation is read back
// (the REST read's `parts`, an image by its media URL).

import { request } from "./api.js";
import { el } from "./ui.js";

// What the hub reads (docs/media.md): a file of another type is sent as it is, and the
// hub's refusal names it.
const TYPES = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  txt: "text/plain",
  text: "text/plain",
  md: "text/markdown",
  markdown: "text/markdown",
  csv: "text/csv",
  json: "application/json",
  yaml: "application/yaml",
  yml: "application/yaml",
  xml: "application/xml",
  html: "text/html",
  htm: "text/html",
  pdf: "application/pdf",
};
const KNOWN = new Set(Object.values(TYPES));
export const ACCEPTED = [...Object.keys(TYPES).map((ext) => `.${ext}`), ...KNOWN].join(",");

// The media type the hub is told: the browser's when it is one the hub reads, else the
// one the file's extension names, else the browser's (or a generic one).
export function mediaTypeOf(file) {
  if (KNOWN.has(file.type)) return file.type;
  const ext = (file.name || "").split(".").pop().toLowerCase();
  return TYPES[ext] || file.type || "application/octet-stream";
}

export function isImage(mediaType) {
  return /^image\//.test(mediaType || "");
}

export function size(bytes) {
  if (typeof bytes !== "number") return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

// The file's bytes as base64 (a data URL's tail: the browser encodes it natively).
function base64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// A picture over SCALE_ABOVE bytes is scaled down to SCALED_SIDE (the hub's default
// PERSONA_AGENT_IMAGE_MAX_SIDE: the hub would scale it there anyway) before it is sent:
// a phone's photo (3 to 5 MB) is over the hub's default message size (1 MiB, base64
// included) as it is, and fits once scaled. A picture that does not get smaller goes as it is.
const SCALED_SIDE = 1568;
const SCALE_ABOVE = 512 * 1024;
const SCALABLE = new Set(["image/jpeg", "image/png", "image/webp"]);

async function scaled(file) {
  const type = mediaTypeOf(file);
  if (!SCALABLE.has(type) || file.size <= SCALE_ABOVE || typeof OffscreenCanvas === "undefined") return file;
  try {
    const bitmap = await createImageBitmap(file);
    const ratio = Math.min(1, SCALED_SIDE / Math.max(bitmap.width, bitmap.height));
    const canvas = new OffscreenCanvas(Math.round(bitmap.width * ratio), Math.round(bitmap.height * ratio));
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    bitmap.close();
    let blob = await canvas.convertToBlob({ type, quality: 0.85 });
    if (blob.size > SCALE_ABOVE && type !== "image/jpeg") {
      blob = await canvas.convertToBlob({ type: "image/jpeg", quality: 0.85 }); // a photo as PNG
    }
    if (blob.size >= file.size) return file;
    const name = blob.type === type ? file.name : file.name.replace(/(\.[^.]*)?$/, ".jpg");
    return new File([blob], name, { type: blob.type });
  } catch {
    return file; // not decodable here: the hub says what it makes of it
  }
}

// A2A file parts of the files, in order: {raw: base64, mediaType, filename}; large pictures
// scaled down first.
export async function fileParts(files) {
  return Promise.all(
    files.map(async (given) => {
      const file = await scaled(given);
      return { raw: await base64(file), mediaType: mediaTypeOf(file), filename: file.name };
    }),
  );
}

// What the transcript shows of a file: {kind: "image"|"file", name, mediaType, bytes,
// src (a URL the page has), url (a hub path to read with the key)}.
export function shownOfFile(file) {
  const mediaType = mediaTypeOf(file);
  const image = isImage(mediaType);
  return {
    kind: image ? "image" : "file",
    name: file.name,
    mediaType,
    bytes: file.size,
    src: image ? URL.createObjectURL(file) : "",
  };
}

// The attachments of a message read back over REST (its `parts`: docs/media.md).
export function shownOfParts(parts) {
  return (parts || [])
    .filter((part) => part.kind === "image" || part.kind === "file")
    .map((part) => ({
      kind: part.kind,
      name: part.name || "",
      mediaType: part.mediaType || "",
      bytes: part.bytes,
      src: "",
      url: part.kind === "image" ? part.url || "" : "",
    }));
}

// The attachments of an A2A message (a task's history): its file parts.
export function shownOfA2A(parts) {
  return (parts || [])
    .filter((part) => typeof part.raw === "string" || typeof part.url === "string")
    .map((part) => {
      const mediaType = part.mediaType || "";
      const image = isImage(mediaType);
      const raw = typeof part.raw === "string" ? part.raw : "";
      return {
        kind: image ? "image" : "file",
        name: part.filename || "",
        mediaType,
        bytes: raw ? Math.floor((raw.length * 3) / 4) - (raw.match(/=*$/)[0].length || 0) : undefined,
        src: image && raw ? `data:${mediaType};base64,${raw}` : part.url || "",
      };
    });
}

// An image read from the hub with the caller's key (an <img src> would send none).
async function loadImage(img, url) {
  try {
    const blob = await (await request(url)).blob();
    img.src = URL.createObjectURL(blob);
    img.dataset.loaded = "1";
  } catch {
    img.alt = `${img.alt} (not available)`;
    img.dataset.loaded = "failed";
  }
}

function chip(shown, removable) {
  const facts = [shown.name || "file", size(shown.bytes)].filter(Boolean).join(" · ");
  return el("span", { class: "file-chip", title: shown.mediaType, dataset: { mediaType: shown.mediaType } }, el("span", { class: "file-facts" }, facts), removable);
}

function thumbnail(shown, removable) {
  const img = el("img", { class: "thumbnail", alt: shown.name || "image", title: shown.name, loading: "lazy" });
  if (shown.src) img.src = shown.src;
  else if (shown.url) loadImage(img, shown.url);
  return el("span", { class: "thumb", dataset: { mediaType: shown.mediaType, name: shown.name } }, img, removable);
}

// The row of a message's attachments (thumbnails, then chips); null when it has none.
export function attachmentsRow(shown, onRemove = null) {
  if (!shown.length) return null;
  const items = shown.map((item, index) => {
    const remove = onRemove
      ? el("button", { type: "button", class: "remove", title: `Remove ${item.name}`, "aria-label": `Remove ${item.name}`, on: { click: () => onRemove(index) } }, "×")
      : null;
    return item.kind === "image" ? thumbnail(item, remove) : chip(item, remove);
  });
  return el("div", { class: "attachments" }, ...items);
}

// The composer's attachments: a button and hidden file input, the previews above the
// field, drop and paste on the composer. `take()` gives the files and clears them;
// `restore(files)` puts files back (a send the hub refused). `vet(file)` says why a file
// is refused (a persona that takes no images: intake.js), or "" to attach it; a refusal
// is said in `notice` and the file is not attached.
export function composerAttachments(composer, field, onChange = () => {}) {
  let files = [];
  let vet = () => "";
  const notice = el("p", { id: "attach-notice", class: "attach-notice", role: "status", hidden: true });
  const previews = el("div", { id: "attachment-previews", class: "attachment-previews" });
  const input = el("input", { id: "attach-input", type: "file", multiple: true, accept: ACCEPTED, hidden: true });
  const button = el("button", { type: "button", id: "attach", title: "Attach images or files", "aria-label": "Attach images or files", on: { click: () => input.click() } }, "Attach");

  const render = () => {
    for (const img of previews.querySelectorAll("img")) URL.revokeObjectURL(img.src);
    const row = attachmentsRow(files.map(shownOfFile), (index) => {
      files.splice(index, 1);
      render();
    });
    previews.replaceChildren(...(row ? [row] : []));
    onChange(files.length);
  };
  const add = (list) => {
    const given = [...list].filter((file) => file && file.size >= 0);
    const refusals = [...new Set(given.map((file) => vet(file)).filter(Boolean))];
    notice.textContent = refusals.join(" ");
    notice.hidden = !refusals.length;
    const added = given.filter((file) => !vet(file));
    if (!added.length) return;
    files = [...files, ...added];
    render();
  };

  input.addEventListener("change", () => {
    add(input.files);
    input.value = "";
  });
  composer.addEventListener("dragover", (event) => {
    if (![...event.dataTransfer.types].includes("Files")) return;
    event.preventDefault();
    composer.classList.add("dropping");
  });
  composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
  composer.addEventListener("drop", (event) => {
    composer.classList.remove("dropping");
    if (!event.dataTransfer.files.length) return;
    event.preventDefault();
    add(event.dataTransfer.files);
  });
  // A pasted image (a screenshot, say) is attached; pasted text goes in the field.
  field.addEventListener("paste", (event) => {
    const pasted = [...(event.clipboardData ? event.clipboardData.items : [])]
      .filter((item) => item.kind === "file")
      .map((item) => item.getAsFile())
      .filter(Boolean)
      .map((file) => (file.name && file.name !== "image.png" ? file : new File([file], `pasted-${Date.now()}.${(file.type.split("/")[1] || "png").replace("jpeg", "jpg")}`, { type: file.type })));
    if (!pasted.length) return;
    event.preventDefault();
    add(pasted);
  });

  return {
    previews,
    button,
    input,
    notice,
    // What the persona takes: `check(file)` gives the reason a file is refused, or "";
    // `accept` the file chooser's types.
    takes(check, accept) {
      vet = check;
      input.accept = accept || ACCEPTED;
    },
    restore(given) {
      files = [...given, ...files];
      render();
    },
    get count() {
      return files.length;
    },
    take() {
      const taken = files;
      files = [];
      previews.replaceChildren();
      notice.hidden = true;
      onChange(0);
      return taken;
    },
  };
}
