"""Observability: metrics, traces, logs and model prices. Leaves: they import nothing of
the hub above them."""
