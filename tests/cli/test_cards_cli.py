"""Character cards and the original format through the command line."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from persona_agent.cli import app
from persona_agent.personas.formats.charx import ICON_PATH
from tests.personas import BUNDLED
from tests.personas.cards import MIRA_V2, ORLA_V3, card_png, decoded_chunk, picture, pixels
from tests.personas.cards import png_bytes as plain_png
from tests.personas.test_original_format import TRUMP

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_validate_and_agent_card_take_the_original_format(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    shutil.copytree(REPO / "personas", directory)
    (directory / "donald-trump.yaml").write_text(TRUMP, encoding="utf-8")
    result = runner.invoke(app, ["validate", "--personas-dir", str(directory)])
    assert result.exit_code == 0, result.output
    bundled = len(list((REPO / "personas").glob("*.yaml")))  # five personas and a panel
    assert f"{bundled + 1} valid, 0 invalid" in result.output
    result = runner.invoke(app, ["validate", str(directory / "donald-trump.yaml")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["agent-card", "donald-trump", "--personas-dir", str(directory)])
    assert result.exit_code == 0, result.output
    skills = [skill["id"] for skill in json.loads(result.output)["skills"]]
    assert skills == ["donald-trump-conversation", "donald-trump-politics"]


def test_import_a_png_card_then_export_it(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    directory.mkdir()
    image = picture((33, 21))
    source = tmp_path / "Orla (2).png"
    source.write_bytes(card_png(ORLA_V3, image))

    result = runner.invoke(app, ["import-persona", str(source), "--personas-dir", str(directory)])
    assert result.exit_code == 0, result.output
    assert "Imported 'orla-of-the-lighthouse'" in result.output
    # Stored as an upload stores it: the card's JSON, its picture beside it.
    assert json.loads((directory / "orla-of-the-lighthouse.json").read_bytes()) == ORLA_V3
    assert (directory / "orla-of-the-lighthouse.avatar.png").is_file()
    assert not (directory / "orla-of-the-lighthouse.png").exists()
    again = runner.invoke(app, ["import-persona", str(source), "--personas-dir", str(directory)])
    assert again.exit_code == 1
    assert "already exists" in again.output

    card = runner.invoke(app, ["agent-card", "orla-of-the-lighthouse", "-d", str(directory)])
    assert json.loads(card.output)["iconUrl"].endswith("/a2a/orla-of-the-lighthouse/avatar")

    out = tmp_path / "out.png"
    result = runner.invoke(
        app,
        [
            "export-persona",
            "orla-of-the-lighthouse",
            "-d",
            str(directory),
            "--format",
            "v3",
            "--png",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert pixels(out.read_bytes()) == pixels(plain_png(image))
    assert decoded_chunk(out.read_bytes(), "ccv3") == ORLA_V3

    result = runner.invoke(
        app, ["export-persona", "orla-of-the-lighthouse", "-d", str(directory), "--format", "v2"]
    )
    assert result.exit_code == 0, result.output
    v2 = json.loads(result.output)
    assert v2["spec"] == "chara_card_v2"
    assert v2["data"]["name"] == "Orla of the Lighthouse"


def test_export_a_charx_then_import_it_as_the_same_card(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    directory.mkdir()
    image = picture((33, 21))
    source = tmp_path / "orla.png"
    source.write_bytes(card_png(ORLA_V3, image))
    env = {"PERSONA_AGENT_DATA_DIR": str(tmp_path / "data")}
    imported = runner.invoke(app, ["import-persona", str(source), "-d", str(directory)], env=env)
    assert imported.exit_code == 0, imported.output
    charx = tmp_path / "orla.charx"
    exported = runner.invoke(
        app,
        ["export-persona", "orla-of-the-lighthouse", "-d", str(directory), "--charx", str(charx)],
        env=env,
    )
    assert exported.exit_code == 0, exported.output
    assert f"Wrote {charx} (CHARX of 'orla-of-the-lighthouse'" in exported.output
    with zipfile.ZipFile(charx) as archive:
        assert set(archive.namelist()) == {"card.json", ICON_PATH}
        assert pixels(archive.read(ICON_PATH)) == pixels(plain_png(image))

    again = runner.invoke(
        app, ["import-persona", str(charx), "-d", str(directory), "--id", "orla"], env=env
    )
    assert again.exit_code == 0, again.output
    assert (directory / "orla.avatar.png").is_file()
    cards = [
        json.loads(runner.invoke(app, ["export-persona", name, "-d", str(directory)]).output)
        for name in ("orla-of-the-lighthouse", "orla")
    ]
    icon = {"type": "icon", "uri": f"embeded://{ICON_PATH}", "name": "main", "ext": "png"}
    assert cards[1] == cards[0] | {"data": cards[0]["data"] | {"assets": [icon]}}

    v2 = runner.invoke(
        app, ["export-persona", "orla", "-d", str(directory), "--format", "v2", "--charx", "x"]
    )
    assert v2.exit_code == 2
    assert "a CHARX holds a V3 card" in v2.output


def test_a_charxs_assets_are_kept_by_import_and_given_back_by_export(tmp_path: Path) -> None:
    """``import-persona x.charx`` keeps the CHARX's assets in the hub's database (of the
    data directory), as an upload does; ``export-persona --charx`` writes them back."""
    from tests.personas.test_charx import charx as charx_of

    directory = tmp_path / "personas"
    env = {"PERSONA_AGENT_DATA_DIR": str(tmp_path / "data")}
    source = tmp_path / "orla.charx"
    source.write_bytes(charx_of())  # ORLA_V3, its icon and a background, assets/bg.png
    imported = runner.invoke(
        app, ["import-persona", str(source), "-d", str(directory), "--id", "orla"], env=env
    )
    assert imported.exit_code == 0, imported.output
    assert "Kept its 1 asset(s) in the hub's database" in imported.output
    target = tmp_path / "out.charx"
    command = ["export-persona", "orla", "-d", str(directory), "--charx", str(target)]
    exported = runner.invoke(app, command, env=env)
    assert exported.exit_code == 0, exported.output
    assert "avatar and 1 asset(s))" in exported.output
    with zipfile.ZipFile(source) as given, zipfile.ZipFile(target) as written:
        assert written.read("assets/bg.png") == given.read("assets/bg.png")
        listed = json.loads(written.read("card.json"))["data"]["assets"]
        assert {
            "type": "background",
            "uri": "embeded://assets/bg.png",
            "name": "sky",
            "ext": "png",
        } in listed
    # Without the hub's database (another data directory): the card and its avatar only.
    elsewhere = {"PERSONA_AGENT_DATA_DIR": str(tmp_path / "other")}
    alone = runner.invoke(app, command, env=elsewhere)
    assert alone.exit_code == 0, alone.output
    with zipfile.ZipFile(target) as written:
        assert set(written.namelist()) == {"card.json", ICON_PATH}
    assert not (tmp_path / "other").exists()  # nothing made to read


def test_import_a_json_card_with_an_id(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    source = tmp_path / "card.json"
    source.write_text(json.dumps(MIRA_V2), encoding="utf-8")
    result = runner.invoke(
        app, ["import-persona", str(source), "-d", str(directory), "--id", "mira"]
    )
    assert result.exit_code == 0, result.output
    exported = runner.invoke(
        app, ["export-persona", "mira", "-d", str(directory), "--format", "v2"]
    )
    assert json.loads(exported.output) == MIRA_V2


def test_import_copies_the_avatar_a_persona_file_names(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    source_dir = tmp_path / "mine"
    source_dir.mkdir()
    (source_dir / "trump.png").write_bytes(plain_png(picture()))
    (source_dir / "donald-trump.yaml").write_text(TRUMP + "avatar: trump.png\n", encoding="utf-8")
    result = runner.invoke(
        app, ["import-persona", str(source_dir / "donald-trump.yaml"), "-d", str(directory)]
    )
    assert result.exit_code == 0, result.output
    assert (directory / "trump.png").read_bytes() == (source_dir / "trump.png").read_bytes()
    assert runner.invoke(app, ["validate", "-d", str(directory)]).exit_code == 0

    (source_dir / "other.yaml").write_text(TRUMP + "avatar: missing.png\n", encoding="utf-8")
    result = runner.invoke(
        app, ["import-persona", str(source_dir / "other.yaml"), "-d", str(directory)]
    )
    assert result.exit_code == 1
    assert "avatar: no file 'missing.png' beside the persona file" in result.output


def test_bad_cards_are_cli_errors_and_nothing_is_copied(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    directory.mkdir()
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps({k: MIRA_V2[k] for k in ("name", "first_mes")}), encoding="utf-8")
    plain = tmp_path / "plain.png"
    plain.write_bytes(plain_png(picture()))
    for path, expected in ((v1, "V1 character card"), (plain, "no character card in it")):
        result = runner.invoke(app, ["import-persona", str(path), "-d", str(directory)])
        assert result.exit_code == 1, result.output
        assert expected in result.output
        assert str(path) in result.output
    assert list(directory.iterdir()) == []
    result = runner.invoke(app, ["export-persona", "nobody", "-d", str(directory)])
    assert result.exit_code == 1
    assert "No persona with id 'nobody'" in result.output


def test_import_and_new_write_to_the_user_folder_never_to_the_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a new user runs them in a clone (no -d): ./personas holds the read-only examples,
    imported and new personas go to DATA_DIR/personas, in the form an upload stores."""
    for variable in ("PERSONA_AGENT_PERSONAS_DIR", "PERSONA_AGENT_USER_PERSONAS_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PERSONA_AGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    examples = tmp_path / "personas"
    examples.mkdir()
    shutil.copy(BUNDLED / "socrates.yaml", examples)
    (tmp_path / "orla.png").write_bytes(card_png(ORLA_V3, picture((12, 9))))
    plato = b"# Plato, commented\n" + (BUNDLED / "socrates.yaml").read_bytes()
    (tmp_path / "plato.yaml").write_bytes(plato)

    for args in (["import-persona", "orla.png"], ["import-persona", "plato.yaml"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    written = runner.invoke(app, ["new", "Grace Hopper"])
    assert written.exit_code == 0, written.output

    user = tmp_path / "data" / "personas"
    assert sorted(p.name for p in user.iterdir()) == [
        "grace-hopper.yaml",
        "orla-of-the-lighthouse.avatar.png",
        "orla-of-the-lighthouse.json",
        "plato.yaml",
    ]
    assert json.loads((user / "orla-of-the-lighthouse.json").read_bytes()) == ORLA_V3
    assert (user / "plato.yaml").read_bytes() == plato  # as it came, comment and all
    assert sorted(p.name for p in examples.iterdir()) == ["socrates.yaml"]
    listed = runner.invoke(app, ["list-personas", "--json"])
    assert listed.exit_code == 0, listed.output
    ids = {row["id"] for row in json.loads(listed.output)}
    assert {"socrates", "plato", "orla-of-the-lighthouse", "grace-hopper"} <= ids
