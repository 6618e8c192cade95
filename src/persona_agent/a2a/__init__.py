"""The A2A protocol edge: cards, the registry and router, the forwarding handler, the
persona executor and its task lifecycle, the task store, the directory agent, SDK fixes."""
