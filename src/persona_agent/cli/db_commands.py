"""``persona-agent db``: the database's schema, migrated to the newest revision or shown."""

from __future__ import annotations

import typer

from persona_agent.cli.command_settings import command_settings, fail
from persona_agent.errors import ConfigError
from persona_agent.settings import Settings

__all__ = ["db_app"]

db_app = typer.Typer(
    name="db",
    help="The database's schema: migrate it to the newest revision, or show its revision.",
    no_args_is_help=True,
)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Migrate the database (PERSONA_AGENT_DATABASE_URL, default the SQLite file in the data
    directory) to the newest schema; print its revision before and after.

    On PostgreSQL, hubs starting on the same database meanwhile wait for it to finish.
    """
    settings = command_settings()
    before, after, _ = _db_revisions(settings, upgrade=True)
    typer.echo(f"database: {_shown_database(settings)}")
    typer.echo(f"revision before: {before or 'none'}")
    typer.echo(f"revision after: {after or 'none'}")


@db_app.command("current")
def db_current() -> None:
    """Print the database's schema revision and the newest one (head); exit 1 unless the
    database is at the head revision."""
    settings = command_settings()
    current, _, head = _db_revisions(settings, upgrade=False)
    typer.echo(f"database: {_shown_database(settings)}")
    typer.echo(f"current: {current or 'none'}")
    typer.echo(f"head: {head}")
    if current != head:
        typer.secho(
            "The database is not at the head revision: run `persona-agent db upgrade`",
            err=True,
            fg="yellow",
        )
        raise typer.Exit(1)


def _db_revisions(settings: Settings, *, upgrade: bool) -> tuple[str | None, str | None, str]:
    """The database's revision before and after migrating it (when ``upgrade``), and the
    newest revision."""
    import asyncio

    from sqlalchemy.exc import SQLAlchemyError

    from persona_agent.db import create_engine
    from persona_agent.migrations import db_revision, upgrade_db

    async def revisions() -> tuple[str | None, str | None, str]:
        engine = create_engine(settings.resolved_database_url)
        try:
            before, head = await db_revision(engine)
            if not upgrade:
                return before, before, head
            await upgrade_db(engine)
            after, head = await db_revision(engine)
            return before, after, head
        finally:
            await engine.dispose()

    try:
        return asyncio.run(revisions())
    except ConfigError as error:
        fail(str(error))
    except (OSError, SQLAlchemyError) as error:
        fail(f"the database did not answer: {error}")


def _shown_database(settings: Settings) -> str:
    """The database URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(settings.resolved_database_url).render_as_string(hide_password=True)
