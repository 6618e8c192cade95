"""Guards on the calls the hub makes to URLs it was given (webhooks, images, outside agents,
catalogs): which addresses may be called, on the address judged, and replies read bounded."""
