"""The SDK's push-config table as its ``DatabasePushNotificationConfigStore`` keeps it: its
statements, and configs as its rows.

Each config is a row of JSON, encrypted with a Fernet key if one is given, as the SDK
writes it: configs an earlier hub stored through the SDK are read, and the SDK reads ours.

The SDK creates the table itself, on first use (no migration of the hub's makes it):
:func:`create` makes its model's table and index as SQLAlchemy compiles them on SQLite
and PostgreSQL, with ``IF NOT EXISTS``. Neither the SDK's model
(``a2a.server.models``) nor its store is imported: both import SQLAlchemy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from google.protobuf.json_format import MessageToJson, Parse

from persona_agent.db import Sql

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

__all__ = ["CONFIGS", "EXISTS", "ConfigRows", "create"]

logger = logging.getLogger(__name__)

CONFIGS = "push_notification_configs"
"""The SDK's table (its ``PushNotificationConfigModel``)."""

_TABLE_DDL = (
    f"CREATE TABLE IF NOT EXISTS {CONFIGS} (task_id VARCHAR(36) NOT NULL, "
    "config_id VARCHAR(255) NOT NULL, config_data {binary} NOT NULL, owner VARCHAR(255), "
    "protocol_version VARCHAR(16), PRIMARY KEY (task_id, config_id))"
)
_INDEX_DDL = f"CREATE INDEX IF NOT EXISTS ix_{CONFIGS}_owner ON {CONFIGS} (owner)"

EXISTS = Sql(
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name",
    table=CONFIGS,
    postgresql="SELECT 1 WHERE to_regclass(:name) IS NOT NULL",
)
"""A row if the table ``name`` is there (in the schema the statements' names are read in)."""


def create() -> list[Sql]:
    """The SDK's table and its index, unless there already (new statements each time: two
    stores' creations never share one ``executemany``)."""
    return [
        Sql(
            _TABLE_DDL.format(binary="BLOB"),
            table=CONFIGS,
            postgresql=_TABLE_DDL.format(binary="BYTEA"),
        ),
        Sql(_INDEX_DDL, table=CONFIGS),
    ]


_PROTOCOL = "1.0"
"""The ``protocol_version`` of the rows the SDK writes (and this module): the config as
``TaskPushNotificationConfig``'s JSON. Rows without it are A2A 0.3's."""

_COLUMNS = "task_id, config_id, config_data, owner, protocol_version"


class ConfigRows:
    """The SDK's table's statements, and configs to and from its rows.

    ``encryption_key``: a Fernet key (``cryptography`` is imported only then); rows are
    written encrypted, and read decrypted, or as plain JSON when they were not (a warning
    says so), as the SDK's store does.

    Raises:
        ValueError: ``encryption_key`` is not a Fernet key.
    """

    UPSERT = Sql(
        f"INSERT INTO {CONFIGS} ({_COLUMNS}) "
        "VALUES (:task_id, :config_id, :config_data, :owner, :protocol_version) "
        "ON CONFLICT (task_id, config_id) DO UPDATE SET config_data = excluded.config_data, "
        "owner = excluded.owner, protocol_version = excluded.protocol_version",
        table=CONFIGS,
    )
    """A config set (the SDK's ``session.merge``: the row replaced, its owner too)."""
    OF_OWNER = Sql(
        f"SELECT {_COLUMNS} FROM {CONFIGS} WHERE task_id = :task_id AND owner = :owner",
        table=CONFIGS,
    )
    OF_TASK = Sql(f"SELECT {_COLUMNS} FROM {CONFIGS} WHERE task_id = :task_id", table=CONFIGS)
    DELETE = Sql(
        f"DELETE FROM {CONFIGS} WHERE task_id = :task_id AND owner = :owner", table=CONFIGS
    )
    DELETE_ONE = Sql(
        f"DELETE FROM {CONFIGS} "
        "WHERE task_id = :task_id AND owner = :owner AND config_id = :config_id",
        table=CONFIGS,
    )

    def __init__(self, encryption_key: str | bytes | None = None) -> None:
        self._fernet: Fernet | None = None
        if encryption_key:
            from cryptography.fernet import Fernet

            key = encryption_key.encode() if isinstance(encryption_key, str) else encryption_key
            self._fernet = Fernet(key)

    def row(self, config: TaskPushNotificationConfig, owner: str) -> dict[str, Any]:
        """The row of ``config`` (normalized: its ``task_id`` and ``id`` set) of ``owner``."""
        payload = MessageToJson(config).encode("utf-8")
        return {
            "task_id": config.task_id,
            "config_id": config.id,
            "config_data": self._fernet.encrypt(payload) if self._fernet else payload,
            "owner": owner,
            "protocol_version": _PROTOCOL,
        }

    def configs(self, rows: list[tuple[Any, ...]]) -> list[TaskPushNotificationConfig]:
        """The configs of rows read with :attr:`OF_OWNER` or :attr:`OF_TASK`; a row that
        cannot be read is logged and left out."""
        configs = []
        for task_id, config_id, data, owner, protocol in rows:
            try:
                configs.append(self._config(task_id, config_id, data, protocol))
            except ValueError:
                logger.exception(
                    "Could not deserialize push notification config for task %s, config %s, "
                    "owner %s",
                    task_id,
                    config_id,
                    owner,
                )
        return configs

    def _config(
        self, task_id: str, config_id: str, data: bytes | str, protocol: str | None
    ) -> TaskPushNotificationConfig:
        if self._fernet is not None:
            from cryptography.fernet import InvalidToken

            try:
                return _parsed(self._fernet.decrypt(data).decode("utf-8"), task_id, protocol)
            except InvalidToken:
                logger.warning(
                    "Failed to decrypt push notification config for task %s, config %s. "
                    "Attempting to parse as unencrypted JSON. This may indicate an incorrect "
                    "encryption key or unencrypted data in the database.",
                    task_id,
                    config_id,
                )
            except Exception as error:
                raise ValueError(
                    "Failed to parse decrypted push notification config data"
                ) from error
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            return _parsed(text, task_id, protocol)
        except Exception as error:
            raise ValueError(
                "Failed to parse push notification config data. Data is not valid JSON, "
                "or it is encrypted with the wrong key."
            ) from error


def _parsed(payload: str, task_id: str, protocol: str | None) -> TaskPushNotificationConfig:
    """A row's JSON as a config: A2A 1.0's, or 0.3's (a row without ``protocol_version``,
    converted as the SDK converts it)."""
    if protocol == _PROTOCOL:
        return Parse(payload, TaskPushNotificationConfig())
    from a2a.compat.v0_3 import types as types_v03
    from a2a.compat.v0_3.conversions import to_core_task_push_notification_config

    return to_core_task_push_notification_config(
        types_v03.TaskPushNotificationConfig(
            task_id=task_id,
            push_notification_config=types_v03.PushNotificationConfig.model_validate_json(payload),
        )
    )
