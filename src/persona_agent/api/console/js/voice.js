// Spoken answers: the composer's Voice toggle asks the persona for audio (acceptedOutputModes
// audio/wav), and each answer's `voice` artifact -- one complete WAV file a chunk, a
// sentence or a few (docs/media.md) -- is played chunk after chunk as the chunks arrive, on
// a queue of <audio> elements under the answer; its Play button plays them again.

import { el } from "./ui.js";

const STORAGE = "persona-agent.voice";
export const VOICE_ARTIFACT = "voice";
export const AUDIO_MODES = ["audio/wav", "text/plain"];

// Whether the card says the persona speaks (audio among its output modes).
export function speaks(agentCard) {
  const modes = (agentCard && agentCard.defaultOutputModes) || [];
  return modes.some((mode) => /^audio\//.test(mode));
}

// The Voice toggle (aria-pressed), remembered in this browser.
export function voiceToggle() {
  const button = el("button", { type: "button", id: "voice-toggle", class: "voice-toggle", "aria-pressed": "false" }, "Voice");
  const set = (on) => {
    button.setAttribute("aria-pressed", String(on));
    button.title = on ? "Answers are spoken too: click to stop" : "Have answers spoken too";
  };
  set(localStorage.getItem(STORAGE) === "on");
  button.addEventListener("click", () => {
    const on = button.getAttribute("aria-pressed") !== "true";
    localStorage.setItem(STORAGE, on ? "on" : "off");
    set(on);
  });
  return {
    button,
    // Whether the next message asks for voice: on, and the persona speaks.
    get on() {
      return button.getAttribute("aria-pressed") === "true" && !button.disabled;
    },
    offer(available) {
      button.disabled = !available;
      if (!available) button.title = "This persona does not speak: its card offers no audio";
      else set(button.getAttribute("aria-pressed") === "true");
    },
  };
}

// The audio parts of an artifact (inline bytes, base64 in JSON) as blobs, in order.
export function audioBlobs(parts) {
  return (parts || [])
    .filter((part) => typeof part.raw === "string" && /^audio\//.test(part.mediaType || ""))
    .map((part) => {
      const bytes = Uint8Array.from(atob(part.raw), (char) => char.charCodeAt(0));
      return new Blob([bytes], { type: part.mediaType });
    });
}

let playing = null; // the player whose chunks play now: one voice at a time

// The voice of one answer: `add(blobs, autoplay)` queues chunks (played in order while
// `autoplay`), `play()` plays them all from the first. Its element lists the chunks as
// <audio class="voice-chunk" data-index data-bytes data-type>; `data-play-order` says in
// which order play() was asked of them.
export function voicePlayer() {
  const chunks = el("div", { class: "voice-chunks", hidden: true });
  const button = el("button", { type: "button", class: "small voice-play", title: "Play the spoken answer", hidden: true }, "▶ Play");
  const box = el("div", { class: "voice", dataset: { playOrder: "" } }, button, chunks);
  let next = 0; // the chunk to play when the one playing ends
  let running = false;

  // The button says what a click does: play, or stop what plays.
  const showPlaying = (flag) => {
    box.dataset.playing = flag ? "1" : "";
    button.textContent = flag ? "■ Stop" : "▶ Play";
  };

  const stop = () => {
    for (const audio of chunks.children) {
      audio.pause();
      audio.currentTime = 0;
    }
    running = false;
    showPlaying(false);
  };

  const start = (index) => {
    const audio = chunks.children[index];
    if (!audio) {
      running = false; // waits for the next chunk, if one comes
      showPlaying(false);
      return;
    }
    if (playing && playing !== player) playing.stop();
    playing = player;
    running = true;
    next = index + 1;
    showPlaying(true);
    box.dataset.playOrder = [box.dataset.playOrder, String(index)].filter(Boolean).join(",");
    audio.play().then(
      () => (audio.dataset.started = "1"),
      (error) => {
        // Refused (no user gesture) or undecodable: the Play button stays for the user.
        audio.dataset.refused = error.name || "error";
        running = false;
        showPlaying(false);
      },
    );
  };

  const player = {
    element: box,
    stop,
    add(blobs, autoplay = true) {
      for (const blob of blobs) {
        const audio = el("audio", {
          class: "voice-chunk",
          preload: "auto",
          dataset: { index: String(chunks.children.length), bytes: String(blob.size), type: blob.type },
        });
        audio.src = URL.createObjectURL(blob);
        audio.blob = blob; // the chunk itself (the page's policy lets no fetch read blob: URLs)
        audio.addEventListener("ended", () => {
          audio.dataset.ended = "1";
          if (running && playing === player) start(next);
        });
        chunks.append(audio);
        if (autoplay && !running && next === chunks.children.length - 1) start(next);
      }
      button.hidden = chunks.children.length === 0;
    },
    play() {
      stop();
      box.dataset.playOrder = "";
      start(0);
    },
  };
  button.addEventListener("click", () => (box.dataset.playing ? stop() : player.play()));
  return player;
}
