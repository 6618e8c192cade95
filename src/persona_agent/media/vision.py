"""Which personas see images: the persona's ``model.vision`` when it says, else whether its
model's name matches one of the hub's vision model patterns; the embedded model sees none."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from persona_agent.personas.model import Persona

__all__ = ["Vision"]


@dataclass(frozen=True, slots=True)
class Vision:
    """Whether a persona's model sees images (nobody's, by default)."""

    models: tuple[str, ...] = ()
    """Patterns (``fnmatch``, case-insensitive) of the model names that see."""
    default_model: str = ""
    """The model of a persona that names none (the backend's)."""
    embedded: bool = False
    """The hub answers with its embedded model, which sees nothing."""

    def sees(self, persona: Persona) -> bool:
        """Whether ``persona`` is shown the images sent to it (a panel passes none on)."""
        if self.embedded or persona.panel is not None:
            return False
        if persona.model.vision is not None:
            return persona.model.vision
        name = (persona.model.name or self.default_model).lower()
        return any(fnmatchcase(name, pattern.lower()) for pattern in self.models)
