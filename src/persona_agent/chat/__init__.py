"""The chat engine: one persona answering one message (prompt, tool loop), its history,
conversation locks, events, tool seam, budget and usage log; it knows nothing of A2A."""
