"""The console labels an answer of the embedded demo model as such (issue 35, item 2;
docs/local-model.md): a hub on the real embedded model, its answer read in Chromium.

Marked ``local_model`` and run in that group (tests/scheduling.py): one model in memory on
one worker; that worker starts its own Chromium for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium import webdriver

from tests.conftest import MODEL_THREADS
from tests.console.conftest import ConsoleHubFactory, browse, find, open_console, wait
from tests.console.test_chat import last_answer, send_message

pytestmark = pytest.mark.local_model


async def test_an_answer_of_the_demo_model_is_labelled_so(
    console_hub: ConsoleHubFactory, browser: webdriver.Chrome, local_model_dir: Path
) -> None:
    settings = {
        "llm_backend": "local",
        "llm_base_url": None,
        "llm_api_key": None,
        "local_model_dir": local_model_dir,
        "local_threads": MODEL_THREADS,
        "local_max_tokens": 16,
        "local_warm_personas": 0,  # nothing else asks the model meanwhile
    }
    async with console_hub(**settings) as hub:

        def scenario() -> None:
            # Hal the Hermit (tests/integration/conftest.py): a card of a few lines, read in
            # a second where a bundled persona's takes several. The label is the model's,
            # whichever persona answers.
            open_console(browser, hub, "chat/hermit")
            send_message(browser, "Who are you?")
            wait(
                browser,
                "the demo model's answer",
                lambda: last_answer(browser)[1] == "completed" or None,
            )
            meta = find(browser, "#transcript .turn.agent .meta").text
            assert "demo model" in meta, meta
            # The embedded model costs nothing: said in a word, not "$0.0000".
            assert "free" in meta.split(" · "), meta
            assert "$" not in meta, meta

        await browse(scenario)
