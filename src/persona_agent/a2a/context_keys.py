"""The names the A2A modules share: ASGI scope and call-context keys, metadata keys, the
terminal task states and the names of the states an answer ends in. A leaf: every module
of ``a2a/`` may import it, it imports none."""

from __future__ import annotations

from a2a.types.a2a_pb2 import TaskState

__all__ = [
    "BINDING_KEY",
    "BUDGET_STATE_KEY",
    "CALLER_KEY",
    "CONSULT_CHAIN_KEY",
    "CONVERSATION_MODE_STATE_KEY",
    "CUT_METADATA_KEY",
    "ENDED_STATE_NAMES",
    "HANDED_DATA_KIND",
    "NEW_CONTEXT_STATE_KEY",
    "PARTS_METADATA_KEY",
    "PERSONA_SCOPE_KEY",
    "PERSONA_STATE_KEY",
    "PRINCIPAL_STATE_KEY",
    "RAW_STATUS_STATE_KEY",
    "REQUEST_ID_KEY",
    "RPC_BODY_SCOPE_KEY",
    "SUPPLIED_TURN_STATE_KEY",
    "TASK_ERROR_STATE_KEY",
    "TASK_STARTED_STATE_KEY",
    "TERMINAL_STATES",
    "WHOLE_ANSWER_STATE_KEY",
]

PERSONA_SCOPE_KEY = "persona_agent.persona_id"
"""Key of the persona id in the ASGI scope, set by the A2A router."""
RPC_BODY_SCOPE_KEY = "persona_agent.jsonrpc_body"
"""Key of the parsed JSON-RPC body in the ASGI scope, set by the A2A router."""
PERSONA_STATE_KEY = "persona_id"
"""Key of the persona id in ``ServerCallContext.state``, set by the context builder."""
WHOLE_ANSWER_STATE_KEY = "persona_agent.whole_answer"
"""Set in ``ServerCallContext.state`` for a call whose client sees only the finished
task (a blocking, non-streaming send): the answer is then one artifact event, not a
chunk per piece of text (fewer events through the SDK; the same final task)."""
NEW_CONTEXT_STATE_KEY = "persona_agent.new_context"
"""Set in ``ServerCallContext.state`` for a send whose message names neither a context nor
a task: the SDK mints the context's id (a new UUID), so nothing is stored under it yet and
the turn reads no history and no conversation user persona."""
TASK_STARTED_STATE_KEY = "persona_agent.task_started"
"""An ``asyncio.Future`` in ``ServerCallContext.state`` that the executor resolves with the
task's id as it starts: a caller inside the hub (``LocalCalls``) that gives up before the
task's first event reached it still knows which task to cancel."""
RAW_STATUS_STATE_KEY = "persona_agent.list_tasks_status"
"""The ListTasks ``status`` as the client wrote it, in ``ServerCallContext.state``."""
REQUEST_ID_KEY = "persona_agent.request_id"
"""The request's id (for the audit log), in the ASGI scope and ``ServerCallContext.state``."""
CALLER_KEY = "persona_agent.caller"
"""Who calls, for per-caller limits (its principal, or ``ip:{address}``), in the ASGI
scope and ``ServerCallContext.state``."""
CONSULT_CHAIN_KEY = "persona_agent.consult_chain"
"""In ``ServerCallContext.state`` of a consultation: the personas that consulted each other
down to the one called, outermost first (for the depth limit and cycle detection)."""
BUDGET_STATE_KEY = "persona_agent.budget"
"""The request's :class:`~persona_agent.chat.budget.CallBudget` node of the task being
answered, in ``ServerCallContext.state``: set by the executor (the root's, made from the
limits, for a request from outside); a local call passes the same object on (shared, never
copied), and the task it starts hangs its own node under it. Its presence when a task
starts marks a task started inside the hub for a request already counted."""
PRINCIPAL_STATE_KEY = "persona_agent.principal"
"""The caller's :class:`~persona_agent.security.principal.Principal` (absent: anonymous), in
``ServerCallContext.state``: what the calls the hub makes for it are checked against."""
BINDING_KEY = "persona_agent.binding"
"""The binding a call came by (``jsonrpc``, ``http+json`` or ``grpc``), in the ASGI scope and
``ServerCallContext.state``, for the request metrics."""
CONVERSATION_MODE_STATE_KEY = "persona_agent.conversation_mode"
"""In ``ServerCallContext.state`` of a turn a door inside the hub asks for (the REST
conversation operations): ``regenerate`` or ``continue`` the last answer of the conversation
as it is stored, the message's text not read. Over A2A the conversation extension asks it,
naming the conversation's latest task in ``referenceTaskIds``; no client can set a state
key."""
TASK_ERROR_STATE_KEY = "persona_agent.task_error"
"""Set in ``ServerCallContext.state`` by the executor when a task fails on one of the hub's
errors (:class:`~persona_agent.errors.PersonaAgentError`): the error, for a door inside the
hub that answers in a protocol of its own (REST: its status by the error's kind)."""
SUPPLIED_TURN_STATE_KEY = "persona_agent.supplied_turn"
"""In ``ServerCallContext.state`` of a turn a stateless door inside the hub asks for (the
OpenAI-compatible chat completions): the :class:`~persona_agent.chat.supplied.SuppliedTurn`
(the caller's conversation, instructions, tools and sampling). No client can set a state
key."""
HANDED_DATA_KIND = "tool-calls"
"""``kind`` of the data part of a final message that hands calls of the caller's own tools
back to it (:attr:`~persona_agent.chat.events.Done.handed`): ``calls``, each ``id``,
``name``, ``arguments`` (the JSON text the model wrote)."""
CUT_METADATA_KEY = "cut"
"""The final message's metadata key saying the answer stopped at the model's token cap
(``true``; absent otherwise)."""
PARTS_METADATA_KEY = "persona-agent/parts"
"""Metadata of an answer chunk event: how many parts the answer artifact has with it."""

TERMINAL_STATES = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
)

ENDED_STATE_NAMES = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
"""The states an answer ends in (terminal, or waiting for the client), by the names the
hub's collaboration tools report them with."""
