"""Model prices from a file, and what a turn's tokens cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from persona_agent.errors import ConfigError
from persona_agent.llm.base import Usage
from persona_agent.llm.local.weights import LOCAL_MODEL_NAME
from persona_agent.observe.pricing import load_prices


def _file(tmp_path: Path, text: str, name: str = "prices.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_prices_per_million_tokens_with_cached_input(tmp_path: Path) -> None:
    table = load_prices(
        _file(tmp_path, "gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075}\n")
    )
    cost = table.cost("gpt-4o-mini", Usage(1_000, 200, cached_prompt_tokens=400))
    assert cost == pytest.approx((600 * 0.15 + 400 * 0.075 + 200 * 0.60) / 1_000_000)
    # Without a cached price, cached tokens cost what other input does.
    plain = load_prices(_file(tmp_path, '{"m": {"input": 2, "output": 8}}', "prices.json"))
    assert plain.cost("m", Usage(100, 10, cached_prompt_tokens=50)) == pytest.approx(
        (100 * 2 + 10 * 8) / 1_000_000
    )


def test_a_dated_model_name_takes_the_longest_matching_price(tmp_path: Path) -> None:
    table = load_prices(
        _file(
            tmp_path, "gpt-4o: {input: 2.5, output: 10}\ngpt-4o-mini: {input: 0.15, output: 0.6}\n"
        )
    )
    mini = table.price("gpt-4o-mini-2024-07-18")
    assert mini is not None
    assert mini.input == 0.15
    big = table.price("gpt-4o-2024-08-06")
    assert big is not None
    assert big.input == 2.5
    assert table.cost("llama3.2", Usage(10, 10)) is None  # no price: no cost


def test_the_local_model_is_free_unless_priced(tmp_path: Path) -> None:
    free = (LOCAL_MODEL_NAME,)  # as the hub loads its prices
    assert load_prices(None, free=free).cost(LOCAL_MODEL_NAME, Usage(500, 100)) == 0
    assert load_prices(None).cost(LOCAL_MODEL_NAME, Usage(500, 100)) is None
    priced = load_prices(
        _file(tmp_path, f"{LOCAL_MODEL_NAME}: {{input: 1, output: 1}}\n"), free=free
    )
    assert priced.cost(LOCAL_MODEL_NAME, Usage(500, 100)) == pytest.approx(600 / 1_000_000)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("gpt-4o: {input: cheap, output: 1}\n", "model 'gpt-4o': input"),
        ("gpt-4o: {input: -1, output: 1}\n", "model 'gpt-4o': input"),
        ("gpt-4o: {input: 1}\n", "model 'gpt-4o': output"),
        ("gpt-4o: {input: 1, output: 1, discount: 2}\n", "model 'gpt-4o': discount"),
        ("- just a list\n", "mapping of model names"),
        ("gpt-4o: {input: [\n", "not YAML or JSON"),
    ],
)
def test_a_bad_price_file_names_the_file_model_and_field(
    tmp_path: Path, text: str, named: str
) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_prices(path)
    assert str(path) in str(raised.value)
    assert named in str(raised.value)


def test_a_missing_price_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_prices(tmp_path / "nowhere.yaml")
