"""The HTTP application: create_app, its builders, the REST routes and the pages."""
