"""Personas: the model, loading and validation of persona files, the system prompt, stores."""

from persona_agent.personas.loader import (
    PERSONA_SUFFIXES,
    dump_persona_yaml,
    load_persona_file,
    parse_persona_text,
    persona_to_data,
    validation_problems,
)
from persona_agent.personas.model import (
    CONVERSATION_SKILL,
    PERSONA_ID_PATTERN,
    CardSettings,
    CardSkill,
    InteractionSample,
    LanguageStyle,
    ModelSettings,
    Persona,
    ToolSettings,
    is_valid_persona_id,
    slugify,
)
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.personas.stores.store import PersonaChange, PersonaStore
from persona_agent.security.limits import Limits

__all__ = [
    "CONVERSATION_SKILL",
    "PERSONA_ID_PATTERN",
    "PERSONA_SUFFIXES",
    "CardSettings",
    "CardSkill",
    "FilePersonaStore",
    "InteractionSample",
    "LanguageStyle",
    "Limits",
    "ModelSettings",
    "Persona",
    "PersonaChange",
    "PersonaStore",
    "ToolSettings",
    "dump_persona_yaml",
    "is_valid_persona_id",
    "load_persona_dir",
    "load_persona_file",
    "parse_persona_text",
    "persona_to_data",
    "render_system_prompt",
    "slugify",
    "validation_problems",
]
