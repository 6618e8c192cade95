"""Conversations: their keys and tables (messages, alternatives, running summaries, user
personas), the changes people steer them with (issue 37: branches and alternatives of
answers, user personas), import and export, and how much of them a caller keeps
(docs/conversations.md)."""
