// Who the user is to the persona (its {{user}}): a name and a short description, for one
// conversation or saved for all of this caller's (REST /api/v1/user-persona; the hub keeps
// a saved one only for a caller with an API key or token: an anonymous caller's is kept by
// this browser, and sent with each new conversation's first message).

import { apiKey } from "./api.js";
import { userPersona } from "./branches.js";
import { el, errorBox, toast } from "./ui.js";

// Opens the settings with `current` ({name, description} or null) filled in;
// `saveForConversation(user)` keeps them for this conversation (null: removes them). A
// saved user persona is the hub's for a caller it knows (an API key or token), this
// browser's for another. Resolves once the dialog closes.
export function userPersonaDialog(current, saveForConversation) {
  const name = el("input", { id: "user-name", maxlength: 64, placeholder: "User", autocomplete: "off" });
  const description = el("textarea", { id: "user-description", rows: 4, maxlength: 2000 });
  const scope = el(
    "select",
    { id: "user-scope" },
    el("option", { value: "conversation" }, "this conversation"),
    el(
      "option",
      { value: "saved" },
      apiKey() ? "all my conversations (saved)" : "all my conversations in this browser",
    ),
  );
  const problem = el("div", { class: "user-problem" });
  const save = el("button", { type: "submit", id: "user-save", class: "primary" }, "Save");
  const forget = el("button", { type: "button", id: "user-forget" }, "Remove");
  const close = el("button", { type: "button", id: "user-cancel" }, "Cancel");
  const dialog = el(
    "dialog",
    { id: "user-dialog", class: "dialog" },
    el(
      "form",
      { id: "user-form" },
      el("h2", {}, "You, to the persona"),
      el("p", { class: "note" }, "The persona calls you by this name ({{user}}) and reads the description."),
      el("label", { for: "user-name" }, "Name"),
      name,
      el("label", { for: "user-description" }, "Description"),
      description,
      el("label", { for: "user-scope" }, "For"),
      scope,
      problem,
      el("div", { class: "dialog-actions" }, forget, close, save),
    ),
  );
  const given = current || {};
  name.value = given.name || "";
  description.value = given.description || "";
  document.body.append(dialog);

  const run = async (work, done) => {
    problem.replaceChildren();
    try {
      await work();
      toast(done);
      dialog.close();
    } catch (error) {
      problem.replaceChildren(errorBox(error));
    }
  };
  dialog.querySelector("form").addEventListener("submit", (event) => {
    event.preventDefault();
    const user = { name: name.value.trim(), description: description.value.trim() };
    if (!user.name) {
      problem.replaceChildren(errorBox(new Error("A name, please (up to 64 characters).")));
      return;
    }
    if (scope.value === "saved") run(() => userPersona.save(user), `Saved: you are ${user.name}`);
    else run(() => saveForConversation(user), `In this conversation you are ${user.name}`);
  });
  forget.addEventListener("click", () => {
    if (scope.value === "saved") run(() => userPersona.forget(), "Your saved user persona is removed");
    else run(() => saveForConversation(null), "This conversation's user persona is removed");
  });
  close.addEventListener("click", () => dialog.close());
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        dialog.remove();
        resolve();
      },
      { once: true },
    );
    dialog.showModal();
    name.focus();
  });
}
