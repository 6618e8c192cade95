"""Memory: what a caller told a persona, kept past the conversation's window and across
the caller's conversations, found again by meaning and by keywords (docs/memory.md)."""
