"""The A2A protocol edge: cards and their forms, the registry and router, admission, the
forwarding handler, what a message carries, every SDK fix (:mod:`.sdk_fixes`); the tasks
(:mod:`.tasks`) and discovery (:mod:`.discovery`) below it."""
