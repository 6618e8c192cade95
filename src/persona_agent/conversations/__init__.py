"""Conversations people steer: branches, user personas, chat files (docs/conversations.md)."""
