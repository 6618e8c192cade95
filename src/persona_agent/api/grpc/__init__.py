"""The gRPC door: A2A 1.0's gRPC binding on a port of its own, every persona on one service
(docs/a2a.md#grpc)."""
