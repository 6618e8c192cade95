"""What an answer cost: model prices from a file, applied to the tokens a turn used.

``PERSONA_AGENT_LLM_PRICES`` names a YAML or JSON file mapping a model name to its prices
in US dollars per million tokens::

    gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075}
    gpt-4o: {input: 2.50, output: 10.00}

A model is found by its exact name, else by the longest name in the file that starts
it (``gpt-4o-mini`` prices ``gpt-4o-mini-2024-07-18``, the dated name a server may
answer with). The models named free (the embedded local model) cost nothing unless the
file says otherwise.
Prompt tokens the server reports as read from its cache are priced at ``cached_input``
(at ``input`` when the file gives none).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from persona_agent.errors import ConfigError
from persona_agent.observe.usage import Usage

__all__ = ["Price", "PriceTable", "load_prices"]

_MAX_PRICE_FILE_BYTES = 1024 * 1024


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_prompt_tokens, usage.prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        dollars = (
            (usage.prompt_tokens - cached) * self.input
            + cached * cached_rate
            + usage.completion_tokens * self.output
        )
        return dollars / 1_000_000


FREE = Price(input=0, output=0)


class PriceTable:
    """Prices by model name (see the module docstring for how a name is found)."""

    def __init__(
        self, prices: dict[str, Price] | None = None, *, free: tuple[str, ...] = ()
    ) -> None:
        self._prices = {**dict.fromkeys(free, FREE), **(prices or {})}
        self._by_length = sorted(self._prices, key=len, reverse=True)

    def price(self, model: str) -> Price | None:
        found = self._prices.get(model)
        if found is not None:
            return found
        for name in self._by_length:
            if model.startswith(name):
                return self._prices[name]
        return None

    def cost(self, model: str, usage: Usage) -> float | None:
        """What ``usage`` of ``model`` cost in US dollars; ``None`` for a model without a
        price."""
        price = self.price(model)
        return None if price is None else price.cost(usage)


def load_prices(path: Path | None, *, free: tuple[str, ...] = ()) -> PriceTable:
    """The price table of the file at ``path``, with the models ``free`` at no cost unless
    the file prices them (no file: only those).

    Raises:
        ConfigError: the file cannot be read, is not YAML or JSON, or a model's prices
            are not numbers (the message names the file, the model and the field).
    """
    if path is None:
        return PriceTable(free=free)
    try:
        if path.stat().st_size > _MAX_PRICE_FILE_BYTES:
            raise ConfigError(f"{path}: a price file is at most 1 MiB")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: the price file cannot be read ({error.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not YAML or JSON: {error}") from None
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        raise ConfigError(
            f"{path}: expected a mapping of model names to prices, "
            "e.g. 'gpt-4o-mini: {input: 0.15, output: 0.60}'"
        )
    prices: dict[str, Price] = {}
    for model, entry in data.items():
        try:
            prices[model] = Price.model_validate(entry)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'prices'}: {e['msg']}"
                for e in error.errors()
            )
            raise ConfigError(f"{path}: model '{model}': {problems}") from None
    return PriceTable(prices, free=free)
