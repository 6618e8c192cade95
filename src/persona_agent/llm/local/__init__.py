"""The embedded model (backend ``local``): Gemma 3 270M through llama.cpp, for a hub with no key.

``backend`` serves chat requests one generation at a time in a worker thread; ``prompt``
writes a persona's transcript; ``answer`` trims what the model says to one turn;
``states`` keeps the model's state for a persona's unchanging prompt start; ``weights``
assembles and verifies the bundled model file; ``source`` opens any other GGUF file, and
``chat_template`` prompts a chat model through its file's template; ``native_log`` sends
llama.cpp's lines to Python logging. Importing this package loads none of them.
"""
