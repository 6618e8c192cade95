// Importing persona files and character cards (YAML, JSON, PNG) through the upload
// endpoint: the hub reads and checks them exactly as it reads its persona directory.

import { HttpError, request } from "./api.js";
import { confirmDialog } from "./ui.js";

export const ACCEPTED = ".yaml,.yml,.json,.png,.charx";

function upload(file, replace) {
  const form = new FormData();
  form.append("file", file, file.name);
  return request(`api/v1/personas/upload${replace ? "?replace=true" : ""}`, {
    method: "POST",
    // What a keyless hub asks of an upload (with its own Origin, which a browser sends
    // anyway): a header no form of another web page can send.
    headers: { "X-Requested-With": "persona-agent-console" },
    body: form,
  });
}

// Import each file; resolves to one result per file: {file, persona} or {file, error}.
// A persona whose id exists already is replaced only if the user says so.
export async function importFiles(files) {
  const results = [];
  for (const file of files) {
    try {
      let response;
      try {
        response = await upload(file, false);
      } catch (error) {
        const replace =
          error instanceof HttpError &&
          error.status === 409 &&
          (await confirmDialog(`${file.name}: ${error.message}. Replace it?`, "Replace"));
        if (!replace) throw error;
        response = await upload(file, true);
      }
      results.push({ file, persona: await response.json() });
    } catch (error) {
      results.push({ file, error });
    }
  }
  return results;
}
