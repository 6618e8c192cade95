"""The HTTP application: create_app, its builders, the REST routes, the pages, and the doors
beside A2A: ``/mcp`` (:mod:`.mcp`) and gRPC (:mod:`.grpc`)."""
