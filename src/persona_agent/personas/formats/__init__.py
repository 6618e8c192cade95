"""Persona formats: bounded YAML and JSON, Tavern character cards, PNG, lorebooks."""
