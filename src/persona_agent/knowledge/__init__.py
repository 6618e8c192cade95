"""Knowledge documents: what a persona (or one conversation) can look up, cited."""
