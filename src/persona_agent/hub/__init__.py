"""The composition root: the settings become the hub's parts here, one builder a part.

``build_hub(settings)`` (:mod:`.composition`) builds every part in the order they start;
``serve`` (through ``create_app``), ``persona-agent mcp``, the terminal chat's embedded hub
and the tests build the hub this way. docs/architecture.md ("Following the settings") says
which module builds which part. Nothing is imported here: each builder imports what its
part needs, so the CLI's light commands stay light.
"""
