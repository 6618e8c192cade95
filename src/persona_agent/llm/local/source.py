"""Which GGUF file the embedded model runs (``PERSONA_AGENT_LOCAL_MODEL``), and finding it.

Unset, it is the bundled Gemma 3 270M (:mod:`persona_agent.llm.local.weights`). Else it
is a path to a GGUF file, or ``hf:OWNER/REPO/FILE`` for a file of a Hugging Face
repository, downloaded into the model directory (``FILE`` may be a glob such as
``*Q4_K_M.gguf``; this needs a machine with internet and the ``huggingface-hub``
package). A file that is missing or is not GGUF gives an
:class:`~persona_agent.errors.LLMError` that names it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm.local.weights import LOCAL_MODEL_NAME, MODEL_FILE_NAME, ensure_model_file

__all__ = ["HF_PREFIX", "ModelSource"]

HF_PREFIX = "hf:"
GGUF_MAGIC = b"GGUF"
SETTING = "PERSONA_AGENT_LOCAL_MODEL"


@dataclass(frozen=True, slots=True)
class ModelSource:
    """The bundled weights (no ``path`` and no ``repo``), a GGUF file, or a file of a
    Hugging Face repository."""

    path: Path | None = None
    repo: str = ""
    filename: str = ""

    @classmethod
    def parse(cls, value: str | None) -> ModelSource:
        """``PERSONA_AGENT_LOCAL_MODEL``'s value as a source (empty or None: the bundled one).

        Raises:
            ConfigError: an ``hf:`` reference without a repository and a file name.
        """
        value = (value or "").strip()
        if not value:
            return cls()
        if value.startswith(HF_PREFIX):
            owner, _, rest = value.removeprefix(HF_PREFIX).partition("/")
            name, _, filename = rest.partition("/")
            if not (owner and name and filename):
                raise ConfigError(
                    f"{SETTING}={value}: a Hugging Face model is hf:OWNER/REPO/FILE "
                    "(FILE a name or a glob, e.g. hf:ggml-org/gemma-3-270m-it-GGUF/*Q8_0.gguf)"
                )
            return cls(repo=f"{owner}/{name}", filename=filename)
        return cls(path=Path(value).expanduser())

    @property
    def bundled(self) -> bool:
        return self.path is None and not self.repo

    @property
    def name(self) -> str:
        """The model's name as reported (usage, ``/readyz``): the file's name without
        ``.gguf``."""
        if self.path is not None:
            return self.path.name.removesuffix(".gguf")
        if self.repo:
            return f"{self.repo}/{self.filename.removesuffix('.gguf')}"
        return LOCAL_MODEL_NAME

    def describe(self, model_dir: Path) -> str:
        """Where the model comes from, for the log."""
        if self.path is not None:
            return str(self.path)
        if self.repo:
            return f"{HF_PREFIX}{self.repo}/{self.filename}"
        return str(model_dir / MODEL_FILE_NAME)

    def resolve(self, model_dir: Path) -> Path:
        """The model file on this machine: assembled, checked or downloaded first. Blocking:
        a worker thread's.

        Raises:
            LLMError: the file is missing or not GGUF; the download failed or is not
                possible here. The message names the file.
        """
        if self.repo:
            return self._download(model_dir)
        return ensure_model_file(model_dir) if self.path is None else _checked(self.path)

    def _download(self, model_dir: Path) -> Path:
        where = f"{HF_PREFIX}{self.repo}/{self.filename}"
        try:
            import huggingface_hub  # an optional package: the hub does not install it
        except ImportError as error:
            raise LLMError(
                f"{SETTING}={where}: fetching a model needs the huggingface-hub package "
                f"(pip install huggingface-hub); or download the file and set {SETTING} "
                "to its path"
            ) from error
        try:
            names = fnmatch.filter(huggingface_hub.list_repo_files(self.repo), self.filename)
            if not names:
                raise ValueError(f"no file of {self.repo} matches {self.filename}")
            return _checked(
                Path(
                    huggingface_hub.hf_hub_download(
                        self.repo, sorted(names)[0], cache_dir=str(model_dir / "huggingface")
                    )
                )
            )
        except (OSError, ValueError, RuntimeError) as error:
            raise LLMError(f"{SETTING}={where} could not be fetched: {error}") from error


def _checked(path: Path) -> Path:
    """``path``, once it is seen to be a GGUF file.

    Raises:
        LLMError: it does not exist, is not a file, cannot be read or is not GGUF.
    """
    if not path.exists():
        raise LLMError(f"{SETTING} names {path}, which does not exist")
    if not path.is_file():
        raise LLMError(f"{SETTING} names {path}, which is not a file")
    try:
        with path.open("rb") as file:
            magic = file.read(len(GGUF_MAGIC))
    except OSError as error:
        raise LLMError(f"{SETTING} names {path}, which cannot be read: {error}") from error
    if magic != GGUF_MAGIC:
        raise LLMError(
            f"{SETTING} names {path}, which is not a GGUF model file (it does not start "
            f"with {GGUF_MAGIC.decode()})"
        )
    return path
