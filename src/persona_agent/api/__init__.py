"""The HTTP application: create_app (the hub's parts, built by :mod:`persona_agent.hub`,
served over HTTP), the REST routes, the pages, and the doors beside A2A: ``/mcp``
(:mod:`.mcp`), gRPC (:mod:`.grpc`) and the OpenAI-compatible one."""
