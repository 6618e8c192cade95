"""Alembic's environment: the revisions run on the connection the hub hands over.

:func:`persona_agent.migrations.upgrade_db` opens it on the hub's async engine and passes it in
``config.attributes["connection"]``; no engine is made here, and there is no offline
(``--sql``) mode.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from persona_agent.migrations.tables import metadata


def _include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """For autogenerate: the hub's tables only (the SDK makes its push configs' table)."""
    return not (type_ == "table" and reflected and name not in metadata.tables)


connection = context.config.attributes.get("connection")
if context.is_offline_mode() or not isinstance(connection, Connection):
    raise RuntimeError(
        "persona-agent's migrations run on a connection: `persona-agent db upgrade`, "
        "or persona_agent.migrations.upgrade_db(engine)"
    )
context.configure(
    connection=connection,
    target_metadata=metadata,
    include_object=_include_object,
    render_as_batch=True,  # SQLite alters a table by copying it
)
with context.begin_transaction():
    context.run_migrations()
