"""llama.cpp's own log lines, into Python logging (logger ``llama_cpp``), never onto stderr.

llama-cpp-python prints llama.cpp's lines straight to stderr, with a level table older
than the library it ships (a warning such as "using full-size SWA cache" passes as an
error), so they landed in the terminal chat and in the hub's log at any level. Here
llama.cpp's errors are WARNING records and everything else DEBUG: quiet at INFO, and
where the hub's log goes (a file, for the terminal chat's embedded hub).
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

__all__ = ["route_native_log"]

logger = logging.getLogger("llama_cpp")

_ERROR = 4  # ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 (continues)
_installed: list[Any] = []  # the ctypes callback: kept alive as long as llama.cpp holds it
_last_level = logging.DEBUG


def route_native_log() -> None:
    """Install the callback (once per process; after ``llama_cpp`` is imported, which
    installs its own)."""
    if _installed:
        return
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        global _last_level
        if level != 5:
            _last_level = logging.WARNING if level == _ERROR else logging.DEBUG
        if logger.isEnabledFor(_last_level):
            line = text.decode("utf-8", "replace").rstrip()
            if line:
                logger.log(_last_level, "%s", line)

    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
    _installed.append(_callback)
