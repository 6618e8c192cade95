"""Three real ``persona-agent serve`` replicas on one fresh PostgreSQL database behind a
real nginx running ``deploy/nginx.conf``: one hub, whichever replica a request reaches, and
a replica killed outright (SIGKILL) loses only what it was running, which ends ``failed``
once its lease expires. Then a soak: 500 mixed requests (``PERSONA_AGENT_TEST_SOAK``)
with a replica killed and restarted midway. The two tests share one replica set (three
processes, nginx and a database take seconds to start), on one pytest-xdist worker
(tests/scheduling.py)."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

from persona_agent.a2a.context_keys import PARTS_METADATA_KEY, TERMINAL_STATES
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import (
    answer_text,
    get_task,
    send,
    status_text,
    submit,
    user_message,
    wait_for_state,
)
from tests.integration.conftest import BUNDLED
from tests.servers.replicas import ReplicaSet, replica_set

LEASE = 3.0
"""Seconds: a killed replica's tasks fail once this has passed (a third of it, the sweep)."""
WAIT = 120.0
"""Seconds a test waits at most for what must eventually happen: a safety bound against a
hang, not a timing (how soon: bench/replicas.py)."""


def _settings(llm: FakeLLM, **more: str) -> dict[str, str]:
    return {
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "test",
        "LLM_MAX_RETRIES": "0",
        "REPLICA_LEASE_SECONDS": str(LEASE),
        "TASK_LISTING": "all",
        "SHUTDOWN_GRACE_SECONDS": "2",
        "LLM_TIMEOUT": str(WAIT),  # an answer held by the test (hold_after) is waited for
        **more,
    }


class Clients:
    """a2a-sdk clients of a persona at nginx or straight at one replica (the cards name
    nginx; a client for a replica gets its card's URLs pointed at the replica)."""

    def __init__(self, replicas: ReplicaSet, http: httpx.AsyncClient) -> None:
        self.replicas = replicas
        self.http = http
        self._cards: dict[str, Any] = {}

    async def at(
        self, base: str, persona_id: str = "socrates", *, streaming: bool = False
    ) -> Client:
        card_json = self._cards.get(persona_id)
        if card_json is None:
            response = await self.http.get(
                f"{self.replicas.front}/a2a/{persona_id}/.well-known/agent-card.json"
            )
            response.raise_for_status()
            card_json = self._cards[persona_id] = response.json()
        card = parse_agent_card(card_json)
        chosen = [
            i
            for i in card.supported_interfaces
            if i.protocol_binding == "JSONRPC" and i.protocol_version == "1.0"
        ]
        chosen[0].url = chosen[0].url.replace(self.replicas.front, base)
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(chosen[:1])
        config = ClientConfig(
            httpx_client=self.http, supported_protocol_bindings=["JSONRPC"], streaming=streaming
        )
        return ClientFactory(config).create(card)


@asynccontextmanager
async def _clients(replicas: ReplicaSet) -> AsyncIterator[Clients]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=WAIT, limits=limits) as http:
        yield Clients(replicas, http)


def _state(event: StreamResponse) -> TaskState | None:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return None


async def _card_description(http: httpx.AsyncClient, base: str, persona_id: str) -> str | None:
    response = await http.get(f"{base}/a2a/{persona_id}/.well-known/agent-card.json")
    return response.json()["description"] if response.status_code == 200 else None


async def _eventually(probe: Any, what: str) -> None:
    """Return once ``await probe()`` is true (AssertionError after :data:`WAIT`, a hang)."""
    try:
        async with asyncio.timeout(WAIT):
            while not await probe():  # noqa: ASYNC110 (replicas polled over HTTP)
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {WAIT:g} s: {what}") from None


async def _one_hub(replicas: ReplicaSet, llm: FakeLLM) -> None:
    r0, r1, r2 = replicas.replicas
    front = replicas.front
    async with _clients(replicas) as clients:
        # Two slow answers: one on r0 (streamed), one on r1, each held after 10 words
        # until the test releases them (r0's never is: it is killed mid-answer).
        words = [f"w{i} " for i in range(120)]
        slow = Reply("".join(words), chunks=words, token_delay=0.05, hold_after=10)
        llm.script(slow, slow)
        streaming_r0 = (await clients.at(r0.url, streaming=True)).send_message(
            user_message("Talk on r0")
        )
        first = await anext(streaming_r0)
        doomed = first.task.id
        on_r1 = await clients.at(r1.url)
        survivor = await submit(on_r1, "Talk on r1")
        await asyncio.to_thread(llm.wait_held, 2)

        # Tasks anywhere: read through nginx, listed on r2, followed live from r2.
        via_nginx = await clients.at(front)
        assert (await get_task(via_nginx, doomed)).status.state == TaskState.TASK_STATE_WORKING
        listed = await (await clients.at(r2.url)).list_tasks(ListTasksRequest())
        assert {doomed, survivor} <= {task.id for task in listed.tasks}
        following = (await clients.at(r2.url, streaming=True)).subscribe(
            SubscribeToTaskRequest(id=survivor)
        )
        snapshot = await anext(following)
        assert snapshot.HasField("task")

        # r0 is killed mid-answer; its client resubscribes through nginx and sees the task
        # end failed once r0's lease has expired, and nobody else's task is touched.
        r0.kill()
        try:
            async for _ in streaming_r0:
                pass
            raise AssertionError("the stream of a killed replica ended normally")
        except A2AClientError:
            pass
        resubscribed = [
            event
            async for event in (await clients.at(front, streaming=True)).subscribe(
                SubscribeToTaskRequest(id=doomed)
            )
        ]
        assert _state(resubscribed[-1]) == TaskState.TASK_STATE_FAILED, resubscribed[-1]
        failed = await get_task(via_nginx, doomed)
        assert "replica lost" in status_text(failed)
        llm.release()  # the survivor's answer goes on

        # The survivor's live subscriber on r2 gets every later chunk once, in order.
        rest = [event async for event in following]
        counts = [
            int(e.artifact_update.metadata.fields[PARTS_METADATA_KEY].number_value)
            for e in rest
            if e.HasField("artifact_update")
        ]
        assert counts == list(range(counts[0], counts[0] + len(counts))), counts
        held = sum(len(a.parts) for a in snapshot.task.artifacts)
        assert counts[0] == held + 1, (counts[0], held)
        assert _state(rest[-1]) == TaskState.TASK_STATE_COMPLETED
        done = await wait_for_state(on_r1, survivor, TaskState.TASK_STATE_COMPLETED)
        assert answer_text(done) == "".join(words)

        # Personas everywhere: a persona written through r1 is served by r2 (how soon:
        # bench/replicas.py).
        http = clients.http
        persona = {"id": "ada", "name": "Ada Lovelace", "description": "First programmer."}
        created = await http.post(f"{r1.url}/api/v1/personas", json=persona)
        assert created.status_code == 201, created.text
        await _eventually(
            lambda: _description_is(http, r2.url, "ada", "First programmer."),
            "the persona on r2",
        )
        # ETag across replicas: the same If-Match on r1 and r2, one wins.
        etag = created.headers["etag"]
        answers = await asyncio.gather(
            http.put(
                f"{r1.url}/api/v1/personas/ada",
                json={**persona, "description": "Analyst."},
                headers={"If-Match": etag},
            ),
            http.put(
                f"{r2.url}/api/v1/personas/ada",
                json={**persona, "description": "Poet."},
                headers={"If-Match": etag},
            ),
        )
        assert sorted(a.status_code for a in answers) == [200, 412]

        # Cancel through another replica stops the model.
        llm.script(Hang())
        on_r2 = await clients.at(r2.url)
        hanging = await submit(on_r2, "Hello?")
        await asyncio.to_thread(llm.wait_requests, 3)
        canceled = await on_r1.cancel_task(CancelTaskRequest(id=hanging))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await asyncio.to_thread(llm.wait_disconnect)

        # A conversation continues through nginx on whichever replica.
        llm.script(Reply("Earlier answer."), Reply("Later answer."))
        opening = await send(via_nginx, "Earlier question")
        later = await send(via_nginx, "Later question", opening.context_id)
        assert answer_text(later) == "Later answer."
        contents = [m.get("content") for m in llm.requests[-1]["messages"]]
        assert "Earlier answer." in contents

        # r0 comes back (same port): it serves, and the failed task stays failed.
        await asyncio.to_thread(r0.restart)
        ready = await http.get(f"{r0.url}/readyz")
        assert ready.json()["status"] == "ready"
        llm.script(Reply("Back again."))
        back = await send(await clients.at(r0.url), "Are you back?")
        assert answer_text(back) == "Back again."
        assert (await get_task(via_nginx, doomed)).status.state == TaskState.TASK_STATE_FAILED
        assert await _card_description(http, r0.url, "ada") in ("Analyst.", "Poet.")


async def _description_is(http: httpx.AsyncClient, base: str, persona_id: str, text: str) -> bool:
    return await _card_description(http, base, persona_id) == text


@pytest.fixture(scope="module")
def nginx_llm() -> Iterator[FakeLLM]:
    """The replicas' model: what a test scripts, else the soak's answers."""
    with FakeLLM(default=_soak_answer) as llm:
        yield llm


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, nginx_llm: FakeLLM) -> Iterator[ReplicaSet]:
    """Three replicas on a fresh database behind nginx, for the module's tests (each
    leaves every replica running, and every task it made terminal)."""
    root = tmp_path_factory.mktemp("replicas")
    personas_dir = root / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    with replica_set(3, personas_dir, root, at_once=True, **_settings(nginx_llm)) as replicas:
        yield replicas


def test_three_replicas_behind_nginx_are_one_hub(replicas: ReplicaSet, nginx_llm: FakeLLM) -> None:
    nginx_llm.reset()
    asyncio.run(_one_hub(replicas, nginx_llm))


SOAK_OPERATIONS = int(os.environ.get("PERSONA_AGENT_TEST_SOAK", "500"))
"""How many operations (the conformance soak's setting; README.md, Development)."""
SLOW = "[slow]"


def _soak_answer(body: dict[str, Any]) -> Reply:
    """The soak's model: an instant echo, or 15 words 20 ms apart for a ``[slow]`` message."""
    said = str(body["messages"][-1].get("content", ""))
    if SLOW in said:
        words = [f"s{i} " for i in range(15)]
        return Reply("".join(words), chunks=words, token_delay=0.02)
    return Reply(f"Echo: {said}")


class Soak:
    """The soak's bookkeeping: what each operation saw, and what must hold at the end."""

    def __init__(self, replicas: ReplicaSet, clients: Clients, seed: int) -> None:
        self.replicas = replicas
        self.clients = clients
        self.random = random.Random(seed)
        self.tasks: set[str] = set()
        self.outcomes: dict[str, int] = {}
        self.generations: list[int] = []
        """The generation of each successful persona write (each builds on the one before)."""
        self.writes_unanswered = 0
        """Persona writes whose answer the kill cut off: each may or may not have been
        committed, so the chain may skip its generation (never repeat one)."""
        self.down = False
        self.killed_at = float("inf")

    def base(self) -> str:
        """nginx half the time, else one replica (r0 only while it is up)."""
        if self.random.random() < 0.5:
            return self.replicas.front
        choices = self.replicas.replicas[1:] if self.down else self.replicas.replicas
        return self.random.choice(choices).url

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    async def send(self) -> None:
        client = await self.clients.at(self.base())
        text = f"hello {self.random.random()}"
        task = await send(client, text)
        self.tasks.add(task.id)
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            assert answer_text(task) == f"Echo: {text}"
        else:
            assert "replica lost" in status_text(task), task
        self.count(TaskState.Name(task.status.state))

    async def stream(self) -> None:
        client = await self.clients.at(self.base(), streaming=True)
        seen: list[int] = []
        text = ""
        task_id = ""
        try:
            async for event in client.send_message(user_message(f"{SLOW} stream")):
                task_id = task_id or event.task.id
                if event.HasField("artifact_update"):
                    seen.append(_parts(event))
                    text += "".join(p.text for p in event.artifact_update.artifact.parts)
        except A2AClientError:
            if not task_id:
                raise  # broken before it began: the operation is judged by when
            # Its replica was killed: follow the task on through nginx.
            self.tasks.add(task_id)
            await self.follow(task_id, before=seen)
            self.count("stream resumed")
            return
        self.tasks.add(task_id)
        # Every chunk once, in order (the hub may join words that come close together).
        assert seen == list(range(1, len(seen) + 1)), seen
        assert text == "".join(f"s{i} " for i in range(15))
        self.count("stream")

    async def follow(self, task_id: str, before: list[int] | None = None) -> None:
        """Subscribe through nginx until the task ends: the chunks after the snapshot come
        once each, in order, and continue what the caller saw ``before``."""
        client = await self.clients.at(self.replicas.front, streaming=True)
        for _ in range(50):
            try:
                events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]
                break
            except (A2AClientError, A2AError) as error:
                if "terminal state" in str(error):
                    return  # finished meanwhile: nothing left to follow
                await asyncio.sleep(0.1)  # nginx stepping around the dead replica
        else:
            raise AssertionError(f"could not resubscribe to {task_id}")
        snapshot = events[0].task
        held = sum(len(a.parts) for a in snapshot.artifacts)
        assert max(before or [0]) <= held, (before, held)
        counts = [_parts(e) for e in events[1:] if e.HasField("artifact_update")]
        assert counts == list(range(held + 1, held + 1 + len(counts))), (held, counts)
        assert _state(events[-1]) in TERMINAL_STATES, events[-1]

    async def subscribe(self) -> None:
        task_id = await submit(await self.clients.at(self.base()), f"{SLOW} subscribe")
        self.tasks.add(task_id)
        await self.follow(task_id)
        self.count("subscribe")

    async def cancel(self) -> None:
        task_id = await submit(await self.clients.at(self.base()), f"{SLOW} cancel")
        self.tasks.add(task_id)
        await asyncio.sleep(self.random.random() * 0.2)
        refusal = ""
        try:
            task = await (await self.clients.at(self.base())).cancel_task(
                CancelTaskRequest(id=task_id)
            )
        except (A2AClientError, A2AError) as error:
            if _cut_off(error):
                raise  # no answer (the replica was killed under it): `operation` judges it
            refusal = str(error)
        if refusal:
            assert "cancel" in refusal.lower(), refusal  # it had finished first
            self.count("finished before the cancel")
        elif task.status.state == TaskState.TASK_STATE_CANCELED:
            self.count("canceled")
        else:  # it finished while the cancel was under way: the SDK answers with the task
            assert task.status.state in TERMINAL_STATES, task
            self.count("finished before the cancel")

    async def write_persona(self) -> None:
        http = self.clients.http
        base = self.base()
        for _ in range(100):
            current = await http.get(f"{base}/api/v1/personas/soak")
            assert current.status_code == 200, current.text
            generation = int(current.json()["description"].split("=")[1]) + 1
            try:
                answer = await http.put(
                    f"{base}/api/v1/personas/soak",
                    json={"name": "Soak", "description": f"generation={generation}"},
                    headers={"If-Match": current.headers["etag"]},
                )
            except httpx.TransportError:
                self.writes_unanswered += 1  # committed or not: the chain may skip it
                raise
            if answer.status_code == 200:
                self.generations.append(generation)
                self.count("persona write")
                return
            assert answer.status_code == 412, answer.text  # another writer was first
        raise AssertionError("a persona write lost 100 times in a row")

    async def operation(self) -> None:
        """One operation; one under way on r0 when it is killed may break off (its task,
        if it had one, is checked with the rest at the end)."""
        started = time.monotonic()
        try:
            await self._operation()
        except (A2AClientError, httpx.TransportError):
            if not started < self.killed_at < time.monotonic():
                raise
            self.count("broken off by the kill")

    async def _operation(self) -> None:
        roll = self.random.random()
        for share, run in (
            (0.35, self.send),
            (0.25, self.stream),
            (0.15, self.subscribe),
            (0.10, self.cancel),
            (0.15, self.write_persona),
        ):
            if roll < share:
                await run()
                return
            roll -= share
        await self.send()


def _cut_off(error: Exception) -> bool:
    """No answer from the hub: the connection broke, or nginx's 502 for an upstream that
    broke it after the request was sent (nginx passes a POST to no other replica then)."""
    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        return cause.response.status_code == 502
    return isinstance(cause, httpx.RequestError)


def _parts(event: StreamResponse) -> int:
    return int(event.artifact_update.metadata.fields[PARTS_METADATA_KEY].number_value)


async def _soak(replicas: ReplicaSet) -> Soak:
    r0 = replicas.replicas[0]
    async with _clients(replicas) as clients:
        soak = Soak(replicas, clients, seed=22)
        created = await clients.http.post(
            f"{replicas.front}/api/v1/personas",
            json={"id": "soak", "name": "Soak", "description": "generation=0"},
        )
        assert created.status_code == 201, created.text

        async def everywhere() -> bool:  # the others hear of it through NOTIFY, a moment later
            served = [
                await _card_description(clients.http, replica.url, "soak")
                for replica in replicas.replicas
            ]
            return None not in served

        await _eventually(everywhere, "every replica serves the new persona")
        operations = iter(range(SOAK_OPERATIONS))

        async def worker() -> None:
            for n in operations:
                if n == SOAK_OPERATIONS // 3:
                    soak.down = True
                    r0.kill()
                    soak.killed_at = time.monotonic()
                elif n == SOAK_OPERATIONS // 2:
                    await asyncio.to_thread(r0.restart)
                    soak.down = False
                await soak.operation()

        # A TaskGroup: a failed worker stops the others before the clients close.
        async with asyncio.TaskGroup() as workers:
            for _ in range(12):
                workers.create_task(worker())

        # Every task ends: those r0 was running when it died fail once its lease expires.
        async def all_terminal() -> bool:
            client = await clients.at(replicas.front)
            for task_id in soak.tasks:
                if (await get_task(client, task_id)).status.state not in TERMINAL_STATES:
                    return False
            return True

        await _eventually(all_terminal, "every task terminal")
        # And so does every task the hub has, those of operations broken off included.
        client = await clients.at(replicas.front)
        listed: list[Task] = []
        token = ""
        for _ in range(1000):
            page = await client.list_tasks(ListTasksRequest(page_size=100, page_token=token))
            listed += page.tasks
            token = page.next_page_token
            if not token:
                break
        assert soak.tasks <= {task.id for task in listed}
        assert [t.id for t in listed if t.status.state not in TERMINAL_STATES] == []
        # No persona version lost: the writes form one chain (each generation written once;
        # one skipped only where a write's answer was cut off by the kill, which may have
        # committed it), and every replica serves the last one.
        written = sorted(soak.generations)
        assert len(set(written)) == len(written), written
        skipped = set(range(1, written[-1] + 1)) - set(written)
        assert len(skipped) <= soak.writes_unanswered, (skipped, soak.writes_unanswered)
        served = [
            await _card_description(clients.http, replica.url, "soak")
            for replica in replicas.replicas
        ]
        assert len(set(served)) == 1, served
        last = int(str(served[0]).split("=")[1])
        assert written[-1] <= last <= written[-1] + soak.writes_unanswered, (served, written)
        return soak


def test_a_soak_across_three_replicas_with_one_killed_and_restarted(
    replicas: ReplicaSet, nginx_llm: FakeLLM
) -> None:
    nginx_llm.reset()
    soak = asyncio.run(_soak(replicas))
    done = sum(soak.outcomes.values())
    assert done == SOAK_OPERATIONS, soak.outcomes
    assert soak.outcomes.get("persona write", 0) > SOAK_OPERATIONS // 20
    assert soak.outcomes.get("canceled", 0) > SOAK_OPERATIONS // 100
