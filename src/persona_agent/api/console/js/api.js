// Requests to the hub: its address, the API key, and errors a person can read.
//
// The console is an ordinary client of the hub: every request goes through request(),
// which sends the key (if one is set) and, when the hub answers 401, asks for one and
// sends the request again.

import { askForKey } from "./ui.js";

// The hub's root, from the console's own address (/console/ -> /), so that the console
// works behind a reverse proxy that serves the hub under a prefix.
export const HUB = new URL("../", document.baseURI);

const KEY_STORAGE = "persona-agent.apiKey";

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

// Kept in sessionStorage: it lasts as long as the tab, and no other tab or later visit
// sees it.
export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
  window.dispatchEvent(new Event("apikeychange"));
}

const KEY_WANTED = "persona-agent.keyWanted";

// Whether the hub has asked this tab for a key (a 401): the key field is shown then.
export function keyWanted() {
  return sessionStorage.getItem(KEY_WANTED) === "1";
}

export function setKeyWanted() {
  if (keyWanted()) return;
  sessionStorage.setItem(KEY_WANTED, "1");
  window.dispatchEvent(new Event("apikeychange"));
}

export function hubUrl(path) {
  return new URL(path.replace(/^\//, ""), HUB).toString();
}

export class HttpError extends Error {
  constructor(status, message, problems = []) {
    super(message);
    this.status = status;
    this.problems = problems;
  }
}

// The message and the problems of an error answer: the REST API's {"detail": ...} (a
// string, or FastAPI's list of {loc, msg}), A2A's {"error": {"message"}}, or the status.
export async function readError(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says it
  }
  const status = `${response.status} ${response.statusText}`.trim();
  if (body && typeof body.detail === "string") return new HttpError(response.status, body.detail);
  if (body && Array.isArray(body.detail)) {
    const problems = body.detail.map((item) => {
      const where = (item.loc || []).filter((part) => part !== "body").join(".");
      return where && !String(item.msg).includes(`${where}:`) ? `${where}: ${item.msg}` : item.msg;
    });
    return new HttpError(response.status, problems.join("; ") || status, problems);
  }
  if (body && body.error && body.error.message) {
    return new HttpError(response.status, body.error.message);
  }
  return new HttpError(response.status, status);
}

// fetch() for the hub: the key as a bearer credential (an API key or an OIDC token, as
// both the REST API and A2A accept), revalidated caches (a card edited a moment ago is
// not shown stale), and a prompt for the key on 401. Resolves to an ok Response, or
// throws an HttpError.
export async function request(path, options = {}) {
  for (;;) {
    const headers = new Headers(options.headers || {});
    const key = apiKey();
    if (key) headers.set("Authorization", `Bearer ${key}`);
    const response = await fetch(hubUrl(path), { cache: "no-cache", ...options, headers });
    if (response.ok) return response;
    const error = await readError(response);
    if (response.status === 401) {
      setKeyWanted();
      const given = await askForKey(error.message, Boolean(key));
      if (given) {
        setApiKey(given);
        continue;
      }
    }
    throw error;
  }
}

export async function getJson(path) {
  return (await request(path)).json();
}
