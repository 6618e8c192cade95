"""Knowledge: documents a persona (or one conversation) can look up, cut into passages,
embedded, and the passages relevant to a turn put in its prompt and cited in the answer
(docs/knowledge.md)."""
