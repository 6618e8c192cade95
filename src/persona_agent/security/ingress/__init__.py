"""Guards on what reaches the hub, before any route reads it: the ``Host`` and ``Origin`` a
request may name, bounded request heads and bodies, and deadlines for slow clients."""
