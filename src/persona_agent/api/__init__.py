"""The HTTP application: create_app (the hub's parts, built by :mod:`persona_agent.hub`,
served over HTTP), the REST routes and the pages."""
