"""The hub's directory agent in process: its card (cached, bounded), its answer, its paths."""

from __future__ import annotations

from a2a.helpers import get_data_parts, get_message_text
from a2a.server.routes import create_rest_routes

from persona_agent.a2a.cards import NAMED_PERSONAS, build_hub_card
from persona_agent.a2a.discovery.directory import HubDirectory
from persona_agent.a2a.router import A2ARouter
from persona_agent.personas.model import Persona

BASE = "https://hub.example"


def persona(persona_id: str, name: str, description: str = "A test persona.") -> Persona:
    return Persona.from_data(
        persona_id,
        {
            "name": name,
            "description": description,
            "personal_background": "None to speak of.",
            "language_style": {"tone": "plain"},
            "knowledge_domains": {"Testing": ["cards"]},
        },
    )


def test_the_skill_names_a_bounded_number_of_personas() -> None:
    many = [persona(f"p{i:03d}", f"Persona {i:03d}") for i in range(NAMED_PERSONAS + 7)]
    (skill,) = build_hub_card(many, BASE).skills
    assert "Persona 000 (p000)" in skill.description
    assert f"Persona {NAMED_PERSONAS - 1:03d}" in skill.description
    assert f"Persona {NAMED_PERSONAS:03d}" not in skill.description
    assert "and 7 more" in skill.description
    assert build_hub_card([], BASE).skills[0].description.endswith("It serves no personas yet.")


def test_the_card_is_built_again_only_when_the_personas_change() -> None:
    served = [persona("ada", "Ada")]
    directory = HubDirectory(lambda: list(served), BASE)
    first = directory.card_dict
    assert directory.card_dict is first
    served.append(persona("bob", "Bob"))
    assert directory.card_dict is not first
    assert "Bob (bob)" in directory.card.skills[0].description
    etag = directory.card_etag
    served[0] = persona("ada", "Ada Byron")  # same id, another version
    assert directory.card_etag != etag
    assert "Ada Byron (ada)" in directory.card.skills[0].description


def test_the_answer_lists_each_persona_on_one_line() -> None:
    served = [persona("ada", "Ada", "Counts.\nAnd computes."), persona("bob", "Bob")]
    answer = HubDirectory(lambda: served, BASE).answer("ctx-1")
    assert answer.context_id == "ctx-1"
    text = get_message_text(answer)
    assert (
        "- Ada (ada): Counts. And computes. Card: "
        f"{BASE}/a2a/ada/.well-known/agent-card.json" in text.splitlines()
    )
    (data,) = get_data_parts(answer.parts)
    assert [entry["id"] for entry in data["personas"]] == ["ada", "bob"]
    assert data["personas"][0]["description"] == "Counts.\nAnd computes."
    assert data["personasUrl"] == f"{BASE}/a2a/personas"
    empty = get_message_text(HubDirectory(list, BASE).answer())
    assert "serves no personas yet" in empty


def test_the_router_takes_every_first_segment_of_the_sdks_paths() -> None:
    """Were the SDK to add an HTTP+JSON path, the directory would serve it too."""
    directory = HubDirectory(list, BASE)
    router = A2ARouter(lambda _persona_id, _task_id: None, directory=directory)
    sdk = {
        route.path.split("/")[1]  # type: ignore[attr-defined]
        for route in create_rest_routes(directory.handler, enable_v0_3_compat=True)
        if "{" not in route.path.split("/")[1]  # type: ignore[attr-defined]
    }
    assert {"message:send", "message:stream", "tasks", "v1"} <= sdk
    assert sdk | {"", ".well-known"} <= router._directory_segments
