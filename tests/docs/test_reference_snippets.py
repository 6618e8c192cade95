"""The blocks that describe the code rather than run it, checked against the code: the
command-line synopsis against the real command's options, the architecture diagrams'
names against the modules and classes they name, the persona id pattern, every persona
file error the docs list (each made by a file that has that problem), the system prompt's
layout (against a rendered prompt), and the greeting extension of a card."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from PIL import Image, PngImagePlugin
from typer.main import get_command

from persona_agent.a2a.cards import build_agent_card
from persona_agent.cli import app
from persona_agent.errors import PersonaFileError
from persona_agent.personas.loader import load_persona_file
from persona_agent.personas.model import PERSONA_ID_PATTERN, Persona
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir
from tests.docs.snippets import REPO, claim

SYNOPSIS = claim("README.md", "persona-agent serve [--host H]")
DIAGRAMS = [
    claim("docs/architecture.md", "cli ──▶ api ──▶ hub ──▶ migrations"),
    claim("docs/architecture.md", "A2A client ──JSON-RPC"),
    claim("docs/architecture.md", "PersonaChange(put | removed)"),
]
ID_PATTERN = claim("docs/personas.md", PERSONA_ID_PATTERN)
ERRORS = claim("docs/personas.md", "personas/tess.yaml: description: Field required")
MEMORY_ERRORS = claim("docs/memory.md", "personas/curie.yaml: memory.token_budget:")
PROMPT = claim("docs/personas.md", "# Who you are")
GREETING = claim("docs/personas.md", '"capabilities": {"extensions"')
NGINX = claim("docs/deployment.md", "upstream persona_agent {")

SOURCE = REPO / "src" / "persona_agent"
ELSEWHERE = {"DefaultRequestHandler": "a2a.server.request_handlers", "AsyncOpenAI": "openai"}
"""Names the diagrams take from the SDKs the hub is built on, and where they are."""


# The command-line synopsis (README.md) --------------------------------------------------


def _commands() -> dict[str, Any]:
    """Every command by its path (``serve``, ``personas create``, ``db upgrade``)."""
    root: Any = get_command(app)  # a group: typer's own copy of click's
    found: dict[str, Any] = {}
    for name, command in root.commands.items():
        if hasattr(command, "commands"):
            found |= {f"{name} {sub}": c for sub, c in command.commands.items()}
        else:
            found[name] = command
    return found


def _named(line: str) -> list[str]:
    """The command paths a synopsis line names: ``personas create|get`` is two,
    ``db upgrade | db current`` two."""
    usage = re.split(r"\s{3,}", line, maxsplit=1)[0]
    named: list[str] = []
    for part in usage.split(" | "):
        tokens = part.removeprefix("persona-agent ").split()
        path = [tokens[0]]
        if len(tokens) > 1 and re.fullmatch(r"[a-z][a-z|-]*", tokens[1]):
            path.append(tokens[1])
        if len(path) == 2:
            named += [f"{path[0]} {sub}" for sub in path[1].split("|")]
        else:
            named.append(path[0])
    return named


def test_the_synopsis_names_every_command_and_only_options_they_take() -> None:
    commands = _commands()
    lines = [line for line in SYNOPSIS.text.splitlines() if line.strip()]
    named: set[str] = set()
    for line in lines:
        assert line.startswith("persona-agent "), line
        paths = _named(line)
        for path in paths:
            assert path in commands, f"README.md synopsis: no command `persona-agent {path}`"
            options = {opt for param in commands[path].params for opt in param.opts}
            for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line):
                assert option in options, f"`persona-agent {path}` has no option {option}"
        named |= set(paths)
    groups = {path.split()[0] for path in commands if " " in path}
    missing = {p for p in commands if p not in named and p.split()[0] not in groups}
    missing |= {g for g in groups if not any(p.startswith(g + " ") for p in named)}
    assert not missing, f"commands the README's synopsis does not list: {sorted(missing)}"


# The architecture diagrams ---------------------------------------------------------------


def _definitions() -> dict[str, set[Path]]:
    """Each class, function and module-level name of the hub, and the files defining it."""
    defined: dict[str, set[Path]] = {}
    pattern = re.compile(r"^\s*(?:class|def|async def)\s+(\w+)|^(\w+)\s*[:=]", re.MULTILINE)
    for path in SOURCE.rglob("*.py"):
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            defined.setdefault(match.group(1) or match.group(2), set()).add(path)
    return defined


@pytest.mark.parametrize("diagram", DIAGRAMS, ids=str)
def test_every_name_in_the_architecture_diagrams_exists(diagram: Any) -> None:
    defined = _definitions()
    text = diagram.text
    checked = 0
    for name, method in re.findall(r"\b([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)(?:\.(\w+))?", text):
        checked += 1
        if name in ELSEWHERE:
            assert hasattr(importlib.import_module(ELSEWHERE[name]), name), name
            continue
        assert name in defined, f"{diagram.where}: nothing in src/ defines {name}"
        if method:
            assert any(
                re.search(rf"def {method}\(", path.read_text(encoding="utf-8"))
                for path in defined[name]
            ), f"{diagram.where}: {name} has no method {method}"
    for path in re.findall(r"\b([\w/]+\.py|[a-z]+/)(?=[\s),:])", text):
        checked += 1
        assert any(
            str(found.relative_to(SOURCE)).endswith(path.rstrip("/")) for found in SOURCE.rglob("*")
        ), f"{diagram.where}: no {path} in src/persona_agent"
    assert checked >= 5


def test_the_nginx_configuration_is_the_file_the_tests_run() -> None:
    """docs/deployment.md shows deploy/nginx.conf, which tests/servers/replicas.py runs."""
    assert NGINX.text + "\n" == (REPO / "deploy" / "nginx.conf").read_text(encoding="utf-8")


# Personas (docs/personas.md) -------------------------------------------------------------


def test_the_id_pattern_is_the_one_the_hub_checks() -> None:
    assert ID_PATTERN.text.strip() == PERSONA_ID_PATTERN


VALID = "name: Tess\ndescription: A test persona.\n"


def _png(chunks: dict[str, str]) -> bytes:
    import io

    info = PngImagePlugin.PngInfo()
    for key, value in chunks.items():
        info.add_text(key, value)
    out = io.BytesIO()
    Image.new("RGB", (4, 4), "teal").save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def _v2_card(**data: Any) -> bytes:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Mira", **data}}
    return json.dumps(card).encode()


ERROR_FILES: list[dict[str, bytes]] = [
    {"tess.yaml": b"name: Tess\nlanguage_style:\n  characteristics: [calm]\n"},
    {
        "tess.yaml": VALID.encode() + b"interaction_samples:\n  - {user: Hi, assistant: Hello}\n"
        b"  - {user: Bye}\n"
    },
    {
        "tess.yaml": VALID.encode() + b"interaction_samples:\n  - {user: a, assistant: b}\n"
        b"  - {user: c, assistant: d}\n  - {platform: Twitter}\n"
    },
    {"tess.yaml": VALID.encode() + b"language_style:\n  tone: calm\n  vocabulary: {a: b}\n"},
    {"tess.yaml": VALID.encode() + b"avatar: tess.png\n"},
    {"card.png": _png({})},
    {"card.png": _png({"chara": "not base64!"})},
    {"old.json": json.dumps({"name": "Old", "description": "d", "first_mes": "Hi"}).encode()},
    {"mira.json": _v2_card(character_book={"entries": [{"keys": "Kestrel", "content": "x"}]})},
    {"tess.yaml": VALID.encode() + b"knowledge_domains:\n  Physics: []\n"},
    {
        "tess.yaml": VALID.encode()
        + b"knowledge_domains:\n  Quantum physics: [a]\n  quantum-physics: [b]\n"
    },
    {"tess.yaml": VALID.encode() + b"knowledge_domains: [Physics]\n"},
    {"tess.yaml": VALID.encode() + b"hobby: chess\n"},
    {"tess.yaml": VALID.encode() + b"version: abc\n"},
    {"tess.yaml": VALID.encode() + b"id: einstein\n"},
    {"tess.yaml": VALID.encode() + b"model:\n  temperature: 3\n"},
    {"tess.yaml": b"name: Tess\ndescription: x\ntone: abc: d\n"},
    {"tess.yaml": b"name: Tess\nname: Tessa\n"},
    {"tess.yaml": VALID.encode() + b"tags: [a]\nborn: 2016-13-04\n"},
    {"tess.yaml": b"name: !!bool Tess\n"},
    {"tess.yaml": b"- name: Tess\n"},
    {"tess.yaml": b""},
    {"tess.yaml": b"name: Tess\ndescription: Caf\xe9\n"},
    {"Bad Name.yaml": VALID.encode()},
    {"tess.yaml": VALID.encode(), "tess.yml": VALID.encode()},
    {
        "tess.yaml": VALID.encode()
        + b"lore:\n  entries:\n    - keys: [echo, '/(\\w+) \\1/']\n      comment: Echoes\n"
        b"      content: Said twice.\n"
    },
    {"tess.yaml": VALID.encode() + b"greeting: '" + b"{{user}}" * 20_000 + b"'\n"},
]
"""For each line of the docs' list of errors, in order, the persona directory that makes it."""


def _error_of(files: dict[str, bytes], root: Path) -> str:
    """What the hub says of the last file of ``files`` in ``personas/`` (run in ``root``):
    the persona directory's loader when there are several, else the file's."""
    directory = root / "personas"
    directory.mkdir()
    for name, content in files.items():
        (directory / name).write_bytes(content)
    if len(files) > 1:
        _, errors = load_persona_dir(Path("personas"))
        assert len(errors) == 1, errors
        return str(errors[0])
    with pytest.raises(PersonaFileError) as error:
        load_persona_file(Path("personas") / next(iter(files)))
    return str(error.value)


def test_each_persona_file_error_the_docs_list_is_what_the_hub_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ERRORS.text.splitlines()
    assert len(lines) == len(ERROR_FILES), "a line of the list has no file that makes it here"
    wrong: list[str] = []
    for number, (line, files) in enumerate(zip(lines, ERROR_FILES, strict=True)):
        root = tmp_path / str(number)
        root.mkdir()
        monkeypatch.chdir(root)
        said = _error_of(files, root)
        if said != line:
            wrong.append(f"the docs: {line}\nthe hub:  {said}")
    assert not wrong, "\n".join(wrong)


MEMORY_ERROR_FILES = [
    b"memory:\n  token_budget: -1\n",
    b"memory:\n  shared_with: [Einstein]\n",
    b"memory:\n  shared_with: [curie]\n",
    b"memory:\n  share: [einstein]\n",
]
"""For each line of docs/memory.md's list of errors, the ``memory`` section that makes it."""


def test_each_memory_section_error_the_docs_list_is_what_the_hub_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = MEMORY_ERRORS.text.splitlines()
    assert len(lines) == len(MEMORY_ERROR_FILES)
    for number, (line, section) in enumerate(zip(lines, MEMORY_ERROR_FILES, strict=True)):
        root = tmp_path / str(number)
        root.mkdir()
        monkeypatch.chdir(root)
        assert _error_of({"curie.yaml": VALID.encode() + section}, root) == line


def _template_pattern(template: str, name: str) -> re.Pattern[str]:
    """The docs' prompt layout as a pattern: its words in order, any whitespace between
    them, each ``{placeholder}`` anything (``{name}`` the persona's name); the notes
    (``<- ...``) and the right-hand alternative (``... or {Further key}:`` and the item
    under it) left out."""
    kept: list[str] = []
    for line in template.splitlines():
        if len(line) - len(line.lstrip()) >= 20:  # the alternative's second line
            continue
        line = re.sub(r"\s+<-.*$", "", line)
        line = re.sub(r"\s{3,}or\s{3,}.*$", "", line)
        kept.append(line)
    text = "\n".join(kept).replace("{name}", name)
    parts: list[str] = []
    for piece in re.split(r"(\{[^{}]*\})", text):
        if piece.startswith("{") and piece.endswith("}"):
            parts.append(r".+?")
        elif piece.strip():
            parts.append(r"\s+".join(re.escape(word) for word in piece.split()))
    return re.compile(r"\s*".join(parts), re.DOTALL)


def test_the_system_prompt_has_the_layout_the_docs_show() -> None:
    persona = Persona.from_data(
        "ada",
        {
            "name": "Ada",
            "description": "A test persona with every section.",
            "personality": "Curious.",
            "personal_background": "Born in 1815.",
            "language_style": {
                "tone": "Precise",
                "characteristics": ["Careful"],
                "sample_phrases": ["Let us compute."],
                "vocabulary": "Mathematical",
            },
            "knowledge_domains": {"Mathematics": ["Analysis"]},
            "scenario": "A salon in London.",
            "interaction_samples": [
                {"user": "Hello?", "assistant": "Good evening."},
                {"type": "quote", "content": "The engine weaves algebraic patterns."},
            ],
            "lore": {
                "entries": [
                    {
                        "keys": [],
                        "constant": True,
                        "content": "Before all.",
                        "position": "before_char",
                    },
                    {
                        "keys": [],
                        "constant": True,
                        "content": "After all.",
                        "position": "after_char",
                    },
                ]
            },
        },
    )
    from persona_agent.personas.formats.lorebook import select_lore

    assert persona.lore is not None
    prompt = render_system_prompt(persona, select_lore(persona.lore, []))
    pattern = _template_pattern(PROMPT.text, persona.name)
    assert pattern.fullmatch(prompt.strip()), prompt


def test_the_greeting_extension_is_what_a_card_declares() -> None:
    shown = json.loads("{" + GREETING.text + "}")["capabilities"]["extensions"]
    persona = Persona.from_data(
        "captain-mira-voss",
        {
            "name": "Captain Mira Voss",
            "description": "The captain of the salvage ship Kestrel.",
            "greeting": "*{{char}} looks up from the star chart.* So you're the new mechanic, "
            "{{user}}?",
            "alternate_greetings": ["*The airlock hisses.* You're late, {{user}}."],
        },
    )
    card = agent_card_to_dict(build_agent_card(persona, "http://127.0.0.1:8000"))
    declared = card["capabilities"]["extensions"]
    by_uri = {extension["uri"]: extension for extension in declared}
    for extension in shown:  # as the card has it, but for the fields the docs leave out
        real = by_uri[extension["uri"]]
        assert {key: real[key] for key in extension} == extension
