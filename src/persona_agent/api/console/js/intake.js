// What a persona takes in a message, from its agent card (its defaultInputModes and its
// skills' inputModes): the composer says it before anything is sent, refuses a picture for
// a persona whose model cannot see, and words the hub's refusals as a user reads them.

import { isImage, mediaTypeOf } from "./attachments.js";

const DOCUMENTS = ".txt,.text,.md,.markdown,.csv,.json,.yaml,.yml,.xml,.html,.htm,.pdf";

// Every media type the card says the persona takes.
export function inputModesOf(agentCard) {
  const modes = new Set((agentCard && agentCard.defaultInputModes) || []);
  for (const skill of (agentCard && agentCard.skills) || []) {
    for (const mode of skill.inputModes || []) modes.add(mode);
  }
  return modes;
}

// {sees, hint, accept, check(file), plain(reason)} for the persona of `agentCard`, called
// `name`. A card that lists no modes (another agent's) is taken at its word: nothing refused.
export function intakeOf(agentCard, name) {
  const modes = inputModesOf(agentCard);
  const sees = !modes.size || [...modes].some((mode) => isImage(mode));
  const blind = `${name}'s model cannot see images; send text or a document.`;
  return {
    sees,
    hint: sees ? "" : `Text and documents only: ${name}'s model cannot see images.`,
    accept: sees ? "" : DOCUMENTS,
    check: (file) => (!sees && isImage(mediaTypeOf(file)) ? blind : ""),
    // The hub's reason, in words a user knows where the console knows better ones.
    plain: (reason) => (/does not see images/.test(reason || "") ? blind : reason),
  };
}
