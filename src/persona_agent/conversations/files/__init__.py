"""Conversations as files, to move them between hubs and apps: the neutral chat every
format converts to and from (:mod:`.chat_file`), the hub's own JSON file, SillyTavern's
JSONL and a Markdown transcript (docs/conversations.md, "Moving chats")."""
