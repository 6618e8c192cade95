"""Collaboration: personas consulting each other, panels, and agents outside the hub,
as tool sources and executors."""
