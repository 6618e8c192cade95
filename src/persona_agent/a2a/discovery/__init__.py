"""Finding agents: the hub's directory agent, its AI Catalog, and an AI Catalog read as a
client (docs/discovery.md)."""
