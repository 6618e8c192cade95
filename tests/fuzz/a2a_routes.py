"""The HTTP+JSON routes of a persona (1.0 and the SDK's 0.3 compatibility routes), with
Hypothesis strategies for their path ids, queries and bodies."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.a2a_params import MEDIA_TYPES, params_1_0
from tests.fuzz.a2a_values import deep, huge_text, mostly, raw_bytes, texts, wild

__all__ = ["ROUTES", "Route", "Targets", "segments"]

Strategy = st.SearchStrategy[Any]


@dataclass(frozen=True)
class Targets:
    """What ids and URLs a route's strategies draw from (the hub's own, and others)."""

    task_ids: Strategy
    config_ids: Strategy
    urls: Strategy


@dataclass(frozen=True)
class Route:
    """``method`` ``path`` (relative to ``/a2a/{persona}/``; ``{task}`` and ``{config}``
    are drawn), of A2A ``version``; ``body`` and ``query`` build their strategies."""

    method: str
    path: str
    version: str
    body: Any = None
    query: Any = None

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


def segments(ids: Strategy) -> Strategy:
    """Path segments: ``ids`` (percent-encoded), or odd ones (encoded dot segments and
    slashes, bytes that are not UTF-8, empty, very long; plain ``..`` never reaches the
    hub: the client resolves it)."""
    encoded = ids.map(
        lambda value: urllib.parse.quote(str(value).encode("utf-8", "surrogatepass"), safe="")
    )
    odd = st.sampled_from(["%2e%2e", "%2E", "a%2Fb", "%00", "%ff%fe", "", "~", "x" * 3000])
    return st.one_of(encoded, encoded, encoded, odd)


def _send_1_0(targets: Targets) -> Strategy:
    return params_1_0(targets.task_ids, targets.urls)["SendMessage"]


def _message_0_3(targets: Targets) -> Strategy:
    file = st.one_of(
        st.fixed_dictionaries({"fileWithBytes": raw_bytes}, optional={"mimeType": MEDIA_TYPES}),
        st.fixed_dictionaries({"fileWithUri": targets.urls}, optional={"mimeType": MEDIA_TYPES}),
    )
    part = mostly(
        st.one_of(
            st.fixed_dictionaries({"text": texts | huge_text}),
            st.fixed_dictionaries({"file": mostly(file)}),
            st.fixed_dictionaries({"data": st.fixed_dictionaries({"data": wild | deep})}),
        )
    )
    return st.fixed_dictionaries(
        {
            "messageId": mostly(st.uuids().map(str)),
            "role": mostly(st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user"])),
            "content": mostly(st.lists(part, min_size=1, max_size=3)),
        },
        optional={"contextId": mostly(texts), "taskId": mostly(targets.task_ids)},
    )


def _send_0_3(targets: Targets) -> Strategy:
    return st.fixed_dictionaries(
        {"message": mostly(_message_0_3(targets))},
        optional={
            "configuration": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "blocking": mostly(st.booleans()),
                        "historyLength": mostly(st.integers(-3, 50)),
                        "acceptedOutputModes": mostly(st.lists(MEDIA_TYPES, max_size=2)),
                    },
                )
            ),
            "metadata": wild,
        },
    )


def _config_1_0(targets: Targets) -> Strategy:
    return params_1_0(targets.task_ids, targets.urls)["CreateTaskPushNotificationConfig"]


def _config_0_3(targets: Targets) -> Strategy:
    config = st.fixed_dictionaries(
        {"url": mostly(targets.urls)}, optional={"id": mostly(texts), "token": mostly(texts)}
    )
    return st.one_of(
        st.fixed_dictionaries({"pushNotificationConfig": mostly(config)}, optional={"name": texts}),
        st.fixed_dictionaries({"config": mostly(config)}, optional={"configId": texts}),
    )


def _list_query(targets: Targets) -> Strategy:
    return st.fixed_dictionaries(
        {},
        optional={
            "contextId": texts,
            "status": st.sampled_from(["TASK_STATE_COMPLETED", "7", "nope", ""]),
            "pageSize": st.sampled_from(["1", "0", "-1", "99999999999", "x"]),
            "historyLength": st.sampled_from(["0", "3", "-2", "1e9"]),
            "includeArtifacts": st.sampled_from(["true", "false", "maybe"]),
        },
    )


def _history_query(targets: Targets) -> Strategy:
    return st.fixed_dictionaries(
        {}, optional={"historyLength": st.sampled_from(["0", "2", "-1", "x", "9" * 30])}
    )


def _cancel(targets: Targets) -> Strategy:
    return st.just({}) | st.fixed_dictionaries({"metadata": wild})


ROUTES = [
    Route("POST", "message:send", "1.0", body=_send_1_0),
    Route("POST", "message:stream", "1.0", body=_send_1_0),
    Route("GET", "tasks", "1.0", query=_list_query),
    Route("GET", "tasks/{task}", "1.0", query=_history_query),
    Route("POST", "tasks/{task}:cancel", "1.0", body=_cancel),
    Route("GET", "tasks/{task}:subscribe", "1.0"),
    Route("POST", "tasks/{task}:subscribe", "1.0"),
    Route("POST", "tasks/{task}/pushNotificationConfigs", "1.0", body=_config_1_0),
    Route("GET", "tasks/{task}/pushNotificationConfigs", "1.0"),
    Route("GET", "tasks/{task}/pushNotificationConfigs/{config}", "1.0"),
    Route("DELETE", "tasks/{task}/pushNotificationConfigs/{config}", "1.0"),
    Route("GET", "extendedAgentCard", "1.0"),
    Route("POST", "{tenant}/message:send", "1.0", body=_send_1_0),
    Route("GET", "{tenant}/tasks/{task}", "1.0"),
    Route("POST", "v1/message:send", "0.3", body=_send_0_3),
    Route("POST", "v1/message:stream", "0.3", body=_send_0_3),
    Route("GET", "v1/tasks/{task}", "0.3", query=_history_query),
    Route("POST", "v1/tasks/{task}:cancel", "0.3", body=_cancel),
    Route("GET", "v1/tasks/{task}:subscribe", "0.3"),
    Route("POST", "v1/tasks/{task}/pushNotificationConfigs", "0.3", body=_config_0_3),
    Route("GET", "v1/tasks/{task}/pushNotificationConfigs", "0.3"),
    Route("GET", "v1/tasks/{task}/pushNotificationConfigs/{config}", "0.3"),
    Route("DELETE", "v1/tasks/{task}/pushNotificationConfigs/{config}", "0.3"),
    Route("GET", "v1/card", "0.3"),
    Route("GET", ".well-known/agent-card.json", "any"),
    Route("GET", "avatar", "any"),
    Route("GET", "assets/assets/background/images/sky.png", "any"),
]
"""Every HTTP+JSON route of a persona (``{tenant}``: the 1.0 routes under a tenant)."""
