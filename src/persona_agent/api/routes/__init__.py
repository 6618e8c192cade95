"""The REST API's routes (``/api/v1``) and the hub's discovery and operations routes."""
