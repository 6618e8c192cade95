"""Where personas live: the store interface and its change events, the file store (the
embedded default) with its directory watcher, and the SQL store for replicas."""
