"""The embedded model (backend ``local``): Gemma 3 270M through llama.cpp, for a hub with no key.

``server`` runs llama.cpp's own server in the hub's process (parallel slots, prompt
cache), on 127.0.0.1; ``backend`` streams chat requests from it through the hub's openai
backend on its port (one model path) and keeps what the server lacks; ``loading``
starts them; ``transcript`` writes a persona's transcript; ``answer`` trims what the model
says to one turn; ``weights`` assembles and verifies the bundled model file; ``source``
finds any other GGUF file; ``chat_template`` prompts a chat model through its file's
template (and its tools); ``special_tokens`` keeps the text of cards, users and tools
from writing the model's control tokens. Importing this package loads none of them.
"""
