"""Errors of persona-agent.

Each error carries a short default message that is safe to show to a client:
no stack trace, no secret. One place (the executor) turns them into A2A
task failures; the REST API maps them to HTTP statuses (:data:`HTTP_STATUSES`).
"""

from __future__ import annotations

__all__ = [
    "HTTP_STATUSES",
    "BudgetSpentError",
    "ConfigError",
    "ConversationEditError",
    "ConversationExistsError",
    "ConversationNotFound",
    "ConversationStateError",
    "DocumentError",
    "DocumentLimitError",
    "DocumentNotFoundError",
    "DocumentTooLargeError",
    "InvalidUserPersonaError",
    "LLMError",
    "MessageNotFound",
    "PersonaAgentError",
    "PersonaExistsError",
    "PersonaFileError",
    "PersonaNotFoundError",
    "PreconditionFailedError",
    "ReadOnlyPersonaError",
    "StorageQuotaError",
    "SwipeNotFound",
    "ToolError",
    "UnsupportedDocumentError",
]


class PersonaAgentError(Exception):
    """Base class: ``message`` is safe to show to a client."""

    message = "persona-agent error"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or type(self).message
        super().__init__(self.message)


class ConfigError(PersonaAgentError):
    """A setting or configuration file is invalid."""

    message = "Invalid configuration"


class PersonaFileError(PersonaAgentError):
    """A persona file is invalid; the message names the file, the field and the reason."""

    message = "Invalid persona file"

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(f"{path}: " + "; ".join(problems))


class PersonaNotFoundError(PersonaAgentError):
    """No persona has this id."""

    message = "Persona not found"


class PersonaExistsError(PersonaAgentError):
    """A persona with this id exists already."""

    message = "Persona already exists"


class PreconditionFailedError(PersonaAgentError):
    """The persona changed since the client read it (``If-Match`` names another version)."""

    message = "The persona has changed since it was read"


class ReadOnlyPersonaError(PersonaAgentError):
    """The persona is one of the read-only examples (it can be replaced, not deleted)."""

    message = "The persona is a read-only example"


class LLMError(PersonaAgentError):
    """The LLM could not produce an answer (connection, status, timeout, malformed reply).

    ``message`` says what kind of failure it was (a status code, a timeout), for the
    client; ``detail`` is what the LLM server itself said, which may hold its secrets:
    it goes to the hub's log only, never to a client or the database.
    """

    message = "The language model failed to answer"

    def __init__(self, message: str | None = None, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail

    def __str__(self) -> str:
        """The message and, for the log, the server's own words."""
        return f"{self.message}: {self.detail}" if self.detail else self.message


class BudgetSpentError(PersonaAgentError):
    """A request's budget of model calls is spent (:mod:`persona_agent.chat.budget`): a
    turn of its tree cannot start."""

    message = "The budget of model calls for this request is spent"


class ToolError(PersonaAgentError):
    """A tool call failed (unknown tool, not allowed, timeout, server error, a consultation
    refused or failed)."""

    message = "Tool call failed"


class DocumentError(PersonaAgentError):
    """A knowledge document cannot be taken (corrupt, empty, no text); the message names
    the file and the reason, and nothing was stored."""

    message = "The document cannot be read"


class UnsupportedDocumentError(DocumentError):
    """A knowledge document of a type the hub does not read."""

    message = "The document's type is not supported"


class DocumentTooLargeError(DocumentError):
    """A knowledge document over a limit: its bytes, or the chunks its text makes."""

    message = "The document is too large"


class DocumentLimitError(DocumentError):
    """The persona has as many documents as it may have."""

    message = "The persona has as many documents as it may have"


class DocumentNotFoundError(PersonaAgentError):
    """No document of this persona has this id."""

    message = "Document not found"


class InvalidUserPersonaError(PersonaAgentError):
    """A user persona (who the user is: name and description) with no name, or a name or
    description that is too long."""

    message = "The user persona is not valid"


class ConversationNotFound(PersonaAgentError):
    """No conversation of the caller's has this persona and context id (another caller's
    is not found either: it is never revealed)."""

    message = "Conversation not found"


class MessageNotFound(PersonaAgentError):
    """The conversation has no message with this id (deleted, or of another conversation)."""

    message = "Message not found"


class SwipeNotFound(PersonaAgentError):
    """The answer has no alternative at this position (or no alternatives at all)."""

    message = "No such alternative of this answer"


class ConversationStateError(PersonaAgentError):
    """The operation does not fit the conversation as it is (nothing to regenerate, no
    answer to continue)."""

    message = "The conversation does not allow this operation now"


class ConversationExistsError(ConversationStateError):
    """A conversation with this persona and context id exists already."""

    message = "A conversation with this context id exists already"


class ConversationEditError(PersonaAgentError):
    """A change a message cannot take (a tool message's text, a blank text)."""

    message = "This message cannot be changed so"


class StorageQuotaError(PersonaAgentError):
    """A write would make a caller keep more conversations, messages or bytes than its
    storage quota allows (the message names the limit and its setting); nothing changed."""

    message = "Over the caller's storage quota"


HTTP_STATUSES: dict[type[PersonaAgentError], int] = {
    PersonaNotFoundError: 404,
    ConversationNotFound: 404,
    MessageNotFound: 404,
    SwipeNotFound: 404,
    ConversationStateError: 409,
    ConversationEditError: 422,
    DocumentNotFoundError: 404,
    UnsupportedDocumentError: 415,
    DocumentTooLargeError: 413,
    DocumentLimitError: 409,
    DocumentError: 422,
    PersonaExistsError: 409,
    PreconditionFailedError: 412,
    ReadOnlyPersonaError: 409,
    InvalidUserPersonaError: 422,
    StorageQuotaError: 409,
}
"""The REST API's answer to each error a route lets through: this status, with the error's
message as ``{"detail": ...}`` (``api/app.py`` registers the handlers)."""
