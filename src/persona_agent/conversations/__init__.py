"""Conversations people steer (issue 37): branches and alternatives of answers, user personas,
import and export (docs/conversations.md)."""
