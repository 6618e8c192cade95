"""The terminal chat (``persona-agent chat``): its command, REPL, A2A client and printing."""
