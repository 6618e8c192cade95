"""The stored conversations' routes (``/api/v1/conversations``): list, read and steer them
(:mod:`.conversations`), their request bodies, their files, the turns that regenerate and
continue, and what reached the model for each answer (docs/conversations.md)."""
