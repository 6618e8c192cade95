"""Every place the hub corrects a2a-sdk (checked against 1.3; ``a2a-sdk~=1.3.0``).

Nothing here patches the SDK but :mod:`.untraced`: each fix is a subclass or a wrapper of
an SDK part, used where the hub builds its routes and handlers (``a2a/registry.py``,
``a2a/router.py``, ``a2a/forwarding.py``, ``a2a/calls.py``,
``a2a/tasks/push/sender.py``); the one patch, :mod:`.untraced`, is applied by one call at
start-up (``api/app.py``). Each names the SDK behaviour it corrects and why, and has a
canary in ``tests/a2a/test_sdk_fixes.py`` that runs the SDK as shipped and fails the day
the SDK stops behaving so: then the fix can go.

- :mod:`.routes`: the SDK's routes answer other than the specification. v0.3
  JSON-RPC: bad parameters are ``-32602`` (the SDK says ``-32600``),
  VersionNotSupported is ``-32009`` (``-32603``); v0.3 HTTP+JSON: the DELETE route
  of a push configuration exists, subscribing to a finished task is a ``400``;
  ListTasks: an unknown ``status`` is Invalid params (the SDK ignores it).
- :mod:`.file_bytes`: v0.3 HTTP+JSON inline file bytes arrive and come back intact (the
  SDK decodes and encodes their base64 twice).
- :mod:`.jsonrpc_body`: a body that cannot be parsed at all is ``-32700`` (the SDK
  answers ``-32603`` for UTF-16 bytes or nesting too deep), and so is one that is not
  JSON text although Python reads it: ``NaN``, ``Infinity``, a lone surrogate (which
  the SDK echoed into an answer it could not write: a 500).
- :mod:`.v03_requests`: v0.3 HTTP+JSON: a stream refused before its first event is a
  ``4xx`` (the SDK cut it mid-stream); ``GET /v1/tasks/{id}`` with a ``historyLength``
  that is not a count is a ``400`` (the SDK answered ``500``).
- :mod:`.subscription`: a subscription does not repeat the events its first task
  snapshot holds.
- :mod:`.last_event`: a stream whose task another replica canceled ends with the
  terminal status, not the whole task again (which a v0.3 client refuses).
- :mod:`.hints`: a 1.0 JSON-RPC call without the ``A2A-Version`` header is told to add
  it; a 1.0 message's unknown role is named, with the roles (the SDK says it is missing).
- :mod:`.numbers`: the cost-v1 counts are JSON integers (the SDK writes ``12.0``).
- :mod:`.untraced`: with the SDK's tracing off, its server parts' no-op tracing wrappers
  (a debug line and a no-op span a call, ten calls a streamed token) are put aside: the
  one fix that replaces attributes of the SDK's classes, which it builds per task.
- :mod:`.validation`: a message's required fields are checked without walking every value
  of its data parts in Python (seconds of the event loop for a large one).
"""
