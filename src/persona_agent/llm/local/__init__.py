"""The embedded model (backend ``local``): Gemma 3 270M through llama.cpp, for a hub with no key.

``server`` runs llama.cpp's own server in the hub's process (parallel slots, prompt
cache); ``backend`` streams chat requests through it from worker threads; ``transcript``
writes a persona's transcript; ``answer`` trims what the model says to one turn;
``weights`` assembles and verifies the bundled model file; ``source`` finds any other GGUF
file, and ``chat_template`` prompts a chat model through its file's template. Importing
this package loads none of them.
"""
