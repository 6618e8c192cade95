"""Can the embedded model (Gemma 3 270M, a base model) keep a running summary?

Ten facts are planted in a ten-turn conversation; the model is asked for a summary of it
in two ways, and a fact counts as kept when its key word is in the summary:

- ``request``: the hub's own summarization request (persona_agent.memory.summary), its
  system and user messages written one after the other, then ``Summary:``;
- ``transcript``: the conversation as the embedded model's transcript, then
  ``A short summary of the conversation above:``, the way a base model is prompted;
- ``notes``: the transcript, then a list to continue, ``Notes on what the user told
  Socrates:`` and a first ``-``.

Run (assembles the model file in DIR the first time, as the hub does)::

    python bench/memory_summary_local.py [DIR]

docs/memory.md ("Running summary") reports the figures.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.weights import ensure_model_file
from persona_agent.memory.summary import summary_request

_FACTS = [
    ("My dog is called Biscuit.", "Biscuit"),
    ("I was born in Lisbon.", "Lisbon"),
    ("My favourite colour is teal.", "teal"),
    ("I'm allergic to peanuts.", "peanut"),
    ("My sister Maria lives in Toronto.", "Toronto"),
    ("I work as a marine biologist.", "marine"),
    ("I drive a red 1998 Volvo.", "Volvo"),
    ("My birthday is on the 3rd of March.", "March"),
    ("I play the cello in a community orchestra.", "cello"),
    ("I hate coriander.", "coriander"),
]
_ANSWERS = [
    "A fine name. Tell me, what makes a name fitting?",
    "A city of hills and light. Do you miss it?",
    "The colour of the sea near the shore. Why that one?",
    "Then we must be careful at the feast.",
    "Far away, then. Do you write to her?",
    "You study what lives beneath the waves. A noble pursuit.",
    "An old and faithful machine, I suppose.",
    "Spring, then. A good season to be born.",
    "Music is the soul's gymnastics.",
    "Each of us has a herb to hate, it seems.",
]


def _complete(model: EmbeddedServer, body: dict[str, object]) -> str:
    """The whole completion of ``body``, from the server's ``/completion`` on its port."""
    request = urllib.request.Request(
        model.address + "/completion",
        data=json.dumps({**body, "stream": False}).encode("utf-8"),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return str(json.loads(response.read())["content"]).strip()


def main() -> None:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("data/models")
    path = ensure_model_file(directory)
    started = time.perf_counter()
    model = EmbeddedServer.start(path, threads=1, slots=1, context_tokens=2048)
    print(f"loaded in {time.perf_counter() - started:.1f} s")
    lines = []
    for (fact, _), answer in zip(_FACTS, _ANSWERS, strict=True):
        lines += [f"User: {fact}", f"Socrates: {answer}"]
    request = summary_request("Socrates", "", lines, 300)
    prompts = {
        "request": f"{request[0]['content']}\n\n{request[1]['content']}\n\nSummary:",
        "transcript": "\n".join(lines) + "\n\nA short summary of the conversation above:\n",
        "notes": "\n".join(lines) + "\n\nNotes on what the user told Socrates:\n-",
    }
    for name, prompt in prompts.items():
        started = time.perf_counter()
        stop = ["\nUser:", "\nSocrates:"]
        body = {"prompt": prompt, "n_predict": 200, "temperature": 0.2, "repeat_penalty": 1.1}
        text = _complete(model, {**body, "stop": stop})
        kept = [word for _, word in _FACTS if word.lower() in text.lower()]
        took = time.perf_counter() - started
        print(f"\n{name}: {len(kept)} of {len(_FACTS)} facts kept, {took:.1f} s")
        print(text)


if __name__ == "__main__":
    main()
