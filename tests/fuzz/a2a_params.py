"""Hypothesis strategies for the parameters of every A2A method, 1.0 and 0.3, each field
mostly valid and sometimes anything (:func:`~tests.fuzz.a2a_values.mostly`).

The test gives ``task_ids`` (ids of tasks the hub really has, mixed with random ones) and
``urls`` (webhooks, one of them a receiver the hub may call), so that calls on a found
task, and a push config really stored, go deep too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.fuzz.a2a_values import (
    context_ids,
    deep,
    huge_text,
    mostly,
    push_urls,
    raw_bytes,
    texts,
    wild,
)

__all__ = ["METHODS_0_3", "METHODS_1_0", "params_0_3", "params_1_0"]

Strategy = st.SearchStrategy[Any]

MEDIA_TYPES = st.sampled_from(
    ["text/plain", "application/json", "text/markdown", "image/png", "application/pdf", ""]
) | st.text(max_size=20)
_text_values = st.one_of(texts, texts, texts, huge_text)
_metadata = st.dictionaries(st.text(max_size=10), wild, max_size=3) | deep


def _part_1_0(urls: Strategy) -> Strategy:
    content = st.one_of(
        st.fixed_dictionaries({"text": _text_values}),
        st.fixed_dictionaries({"data": wild | deep}),
        st.fixed_dictionaries({"raw": raw_bytes, "mediaType": MEDIA_TYPES}),
        st.fixed_dictionaries({"url": urls, "mediaType": MEDIA_TYPES}),
    )
    extra = st.fixed_dictionaries({}, optional={"metadata": _metadata, "filename": texts})
    return mostly(st.builds(lambda a, b: {**a, **b}, content, extra))


def _message_1_0(task_ids: Strategy, urls: Strategy) -> Strategy:
    return st.fixed_dictionaries(
        {
            "messageId": mostly(st.uuids().map(str)),
            "role": mostly(
                st.sampled_from(["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED", "user"])
            ),
            "parts": mostly(st.lists(_part_1_0(urls), min_size=1, max_size=3)),
        },
        optional={
            "contextId": mostly(context_ids),
            "taskId": mostly(task_ids),
            "metadata": _metadata,
            "extensions": mostly(st.lists(texts, max_size=2)),
            "referenceTaskIds": mostly(st.lists(task_ids, max_size=2)),
        },
    )


def _push_config_1_0(task_ids: Strategy, urls: Strategy) -> Strategy:
    return st.fixed_dictionaries(
        {"url": mostly(urls)},
        optional={
            "taskId": mostly(task_ids),
            "id": mostly(texts),
            "token": mostly(texts),
            "authentication": mostly(
                st.fixed_dictionaries({"scheme": texts}, optional={"credentials": texts})
            ),
            "tenant": texts,
        },
    )


_STATES = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_WORKING",
    "TASK_STATE_CANCELED",
    "TASK_STATE_UNSPECIFIED",
    "completed",
    7,
    99,
]


def params_1_0(task_ids: Strategy, urls: Strategy = push_urls) -> dict[str, Strategy]:
    """Parameters of each A2A 1.0 JSON-RPC method (the bodies of HTTP+JSON 1.0 too)."""
    ints = mostly(st.integers(-5, 100))
    send = st.fixed_dictionaries(
        {"message": mostly(_message_1_0(task_ids, urls))},
        optional={
            "configuration": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "acceptedOutputModes": mostly(st.lists(MEDIA_TYPES, max_size=3)),
                        "historyLength": ints,
                        "returnImmediately": mostly(st.booleans()),
                        "taskPushNotificationConfig": _push_config_1_0(task_ids, urls),
                    },
                )
            ),
            "metadata": _metadata,
            "tenant": texts,
        },
    )
    by_task = st.fixed_dictionaries({"taskId": mostly(task_ids), "id": mostly(texts)})
    return {
        "SendMessage": send,
        "SendStreamingMessage": send,
        "GetTask": st.fixed_dictionaries(
            {"id": mostly(task_ids)}, optional={"historyLength": ints, "tenant": texts}
        ),
        "ListTasks": st.fixed_dictionaries(
            {},
            optional={
                "contextId": mostly(context_ids),
                "status": mostly(st.sampled_from(_STATES)),
                "pageSize": ints,
                "pageToken": mostly(texts),
                "historyLength": ints,
                "statusTimestampAfter": mostly(
                    st.sampled_from(["2024-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "yesterday"])
                ),
                "includeArtifacts": mostly(st.booleans()),
            },
        ),
        "CancelTask": st.fixed_dictionaries(
            {"id": mostly(task_ids)}, optional={"metadata": _metadata}
        ),
        "SubscribeToTask": st.fixed_dictionaries({"id": mostly(task_ids)}),
        "CreateTaskPushNotificationConfig": _push_config_1_0(task_ids, urls),
        "GetTaskPushNotificationConfig": by_task,
        "DeleteTaskPushNotificationConfig": by_task,
        "ListTaskPushNotificationConfigs": st.fixed_dictionaries(
            {"taskId": mostly(task_ids)}, optional={"pageSize": ints, "pageToken": texts}
        ),
        "GetExtendedAgentCard": st.fixed_dictionaries({}, optional={"tenant": texts}),
    }


METHODS_1_0 = list(params_1_0(st.just("")))


def _part_0_3(urls: Strategy) -> Strategy:
    file = st.one_of(
        st.fixed_dictionaries({"bytes": raw_bytes}, optional={"mimeType": MEDIA_TYPES}),
        st.fixed_dictionaries({"uri": urls}, optional={"mimeType": MEDIA_TYPES}),
    )
    return mostly(
        st.one_of(
            st.fixed_dictionaries({"kind": st.just("text"), "text": _text_values}),
            st.fixed_dictionaries({"kind": st.just("data"), "data": mostly(_metadata)}),
            st.fixed_dictionaries({"kind": st.just("file"), "file": mostly(file)}),
        )
    )


def _message_0_3(task_ids: Strategy, urls: Strategy) -> Strategy:
    return st.fixed_dictionaries(
        {
            "kind": mostly(st.just("message")),
            "messageId": mostly(st.uuids().map(str)),
            "role": mostly(st.sampled_from(["user", "agent", "ROLE_USER"])),
            "parts": mostly(st.lists(_part_0_3(urls), min_size=1, max_size=3)),
        },
        optional={
            "contextId": mostly(context_ids),
            "taskId": mostly(task_ids),
            "metadata": _metadata,
            "referenceTaskIds": mostly(st.lists(task_ids, max_size=2)),
        },
    )


def _push_config_0_3(urls: Strategy) -> Strategy:
    return st.fixed_dictionaries(
        {"url": mostly(urls)},
        optional={
            "id": mostly(texts),
            "token": mostly(texts),
            "authentication": mostly(
                st.fixed_dictionaries({"schemes": st.lists(texts, max_size=2)})
            ),
        },
    )


def params_0_3(task_ids: Strategy, urls: Strategy = push_urls) -> dict[str, Strategy]:
    """Parameters of each A2A 0.3 JSON-RPC method (the bodies of HTTP+JSON 0.3 too)."""
    send = st.fixed_dictionaries(
        {"message": mostly(_message_0_3(task_ids, urls))},
        optional={
            "configuration": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "acceptedOutputModes": mostly(st.lists(MEDIA_TYPES, max_size=3)),
                        "blocking": mostly(st.booleans()),
                        "historyLength": mostly(st.integers(-5, 100)),
                        "pushNotificationConfig": mostly(_push_config_0_3(urls)),
                    },
                )
            ),
            "metadata": _metadata,
        },
    )
    config_id = st.fixed_dictionaries(
        {"id": mostly(task_ids)}, optional={"pushNotificationConfigId": mostly(texts)}
    )
    return {
        "message/send": send,
        "message/stream": send,
        "tasks/get": st.fixed_dictionaries(
            {"id": mostly(task_ids)}, optional={"historyLength": mostly(st.integers(-5, 100))}
        ),
        "tasks/cancel": st.fixed_dictionaries({"id": mostly(task_ids)}),
        "tasks/resubscribe": st.fixed_dictionaries({"id": mostly(task_ids)}),
        "tasks/pushNotificationConfig/set": st.fixed_dictionaries(
            {"taskId": mostly(task_ids), "pushNotificationConfig": mostly(_push_config_0_3(urls))}
        ),
        "tasks/pushNotificationConfig/get": config_id,
        "tasks/pushNotificationConfig/list": st.fixed_dictionaries({"id": mostly(task_ids)}),
        "tasks/pushNotificationConfig/delete": config_id,
        "agent/getAuthenticatedExtendedCard": st.just({}) | st.none(),
    }


METHODS_0_3 = list(params_0_3(st.just("")))
