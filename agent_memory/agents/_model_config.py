"""Model configuration in one place: which ``ChatCompletionClient`` the agents (and the memory) use.

Two ways to configure, checked in this order for each role (``main`` for the agents, ``memory`` for
the optional lightweight memory model used by MemoryContext for summaries / relevance):

1. An AutoGen component JSON (any ``ChatCompletionClient``: OpenAI, Azure, Anthropic, Ollama...), either
   a file path or the JSON itself, in ``AGENT_MEMORY_MODEL_CONFIG`` (``AGENT_MEMORY_MEMORY_MODEL_CONFIG``)::

       {"provider": "autogen_ext.models.openai.OpenAIChatCompletionClient",
        "config": {"model": "gpt-4o-mini"}}

2. An OpenAI-compatible endpoint from the usual variables:

   ========================================  ======================================================
   ``OPENAI_API_KEY``                         key (optional when ``OPENAI_BASE_URL`` is set: local
                                              servers such as Ollama/vLLM/llama.cpp accept any key)
   ``OPENAI_BASE_URL``                        endpoint, e.g. ``http://localhost:11434/v1`` (Ollama)
   ``AGENT_MEMORY_MODEL``                     model name (default ``gpt-4o-mini`` on api.openai.com;
                                              required with a custom ``OPENAI_BASE_URL``)
   ``AGENT_MEMORY_MODEL_INFO``                JSON ModelInfo for models AutoGen does not know, e.g.
                                              ``{"family": "llama", "vision": false, "function_calling":
                                              true, "json_output": true, "structured_output": false}``
   ``AGENT_MEMORY_MODEL_FAMILY`` /            the same as single flags (``true``/``false``); fields not
   ``_VISION`` / ``_FUNCTION_CALLING`` /      given default to ``family=unknown``, ``vision=false``,
   ``_JSON_OUTPUT`` / ``_STRUCTURED_OUTPUT``  ``function_calling=true``, ``json_output=false``...
   ========================================  ======================================================

   The memory model reads ``AGENT_MEMORY_MEMORY_MODEL`` (and ``AGENT_MEMORY_MEMORY_BASE_URL``,
   ``AGENT_MEMORY_MEMORY_API_KEY``, ``AGENT_MEMORY_MEMORY_MODEL_INFO``), falling back to the main
   endpoint and key. It is optional: when nothing is set :func:`load_memory_model_client` returns None
   and memory works without any LLM.

Missing configuration raises :class:`ModelConfigError` whose message says exactly what to set.

Example:
    >>> from agent_memory.agents import ModelSettings
    >>> s = ModelSettings.from_env({"OPENAI_BASE_URL": "http://localhost:11434/v1",
    ...                             "AGENT_MEMORY_MODEL": "llama3.1", "AGENT_MEMORY_MODEL_FAMILY": "llama"})
    >>> (s.model, s.base_url, s.model_info["family"], s.model_info["function_calling"])
    ('llama3.1', 'http://localhost:11434/v1', 'llama', True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from autogen_core.models import ChatCompletionClient, ModelInfo
from pydantic import BaseModel, Field

from ..errors import AgentMemoryError

Role = Literal["main", "memory"]
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
_BOOL_FLAGS = ("vision", "function_calling", "json_output", "structured_output", "multiple_system_messages")
_MODEL_INFO_DEFAULTS: dict[str, Any] = {
    "family": "unknown",
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "structured_output": False,
    # Most local chat templates accept one system message only; AutoGen then merges leading ones.
    "multiple_system_messages": False,
}


class ModelConfigError(AgentMemoryError):
    """The model is not configured (or configured wrongly). The message says what to set."""


HOW_TO_CONFIGURE = (
    "Configure a model in one of these ways:\n"
    "  - OpenAI:            export OPENAI_API_KEY=sk-...   (optional: AGENT_MEMORY_MODEL=gpt-4o-mini)\n"
    "  - OpenAI-compatible: export OPENAI_BASE_URL=http://localhost:11434/v1 AGENT_MEMORY_MODEL=llama3.1\n"
    "                       (Ollama/vLLM/llama.cpp; for models AutoGen does not know also set\n"
    '                       AGENT_MEMORY_MODEL_INFO=\'{"family": "llama", "function_calling": true}\')\n'
    "  - Any AutoGen ChatCompletionClient: export AGENT_MEMORY_MODEL_CONFIG=/path/to/model.json\n"
    '                       (a component JSON: {"provider": "...", "config": {...}}; inline JSON also works)'
)


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ModelConfigError(f"{name}={value!r} is not a boolean: use true or false")


def _load_json_setting(name: str, value: str) -> Any:
    """``value`` is inline JSON or a path to a JSON file."""
    text = value.strip()
    source = name
    if not text.startswith("{"):
        path = Path(text).expanduser()
        if not path.is_file():
            raise ModelConfigError(f"{name}={value!r}: no such file (give a JSON file path or inline JSON)")
        text = path.read_text(encoding="utf-8")
        source = f"{name} ({path})"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{source} is not valid JSON: {exc}") from exc


class ModelSettings(BaseModel):
    """One resolved model configuration (for the agents or for the memory model)."""

    role: Role = "main"
    component: dict[str, Any] | None = Field(default=None, description="AutoGen component JSON, if used")
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    model_info: dict[str, Any] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, role: Role = "main") -> ModelSettings:
        """Read the configuration for ``role`` from ``env`` (default ``os.environ``). Never raises for
        "nothing configured" (see :meth:`is_configured`); raises :class:`ModelConfigError` for bad values."""
        env = os.environ if env is None else env
        prefix = "AGENT_MEMORY_" if role == "main" else "AGENT_MEMORY_MEMORY_"
        component_raw = env.get(f"{prefix}MODEL_CONFIG")
        if component_raw:
            component = _load_json_setting(f"{prefix}MODEL_CONFIG", component_raw)
            if not isinstance(component, dict) or "provider" not in component:
                raise ModelConfigError(
                    f'{prefix}MODEL_CONFIG must be an AutoGen component JSON object: {{"provider": "...", '
                    '"config": {...}}'
                )
            return cls(role=role, component=component)

        if role == "main":
            model = env.get("AGENT_MEMORY_MODEL") or None
            base_url = env.get("OPENAI_BASE_URL") or None
            api_key = env.get("OPENAI_API_KEY") or None
        else:
            model = env.get("AGENT_MEMORY_MEMORY_MODEL") or None
            if model is None:
                return cls(role=role)  # the memory model is optional
            base_url = env.get("AGENT_MEMORY_MEMORY_BASE_URL") or env.get("OPENAI_BASE_URL") or None
            api_key = env.get("AGENT_MEMORY_MEMORY_API_KEY") or env.get("OPENAI_API_KEY") or None
        if model is None and base_url is None and api_key is not None:
            model = DEFAULT_OPENAI_MODEL
        return cls(
            role=role, model=model, base_url=base_url, api_key=api_key, model_info=_model_info_from_env(env, prefix)
        )

    def is_configured(self) -> bool:
        return self.component is not None or self.model is not None or self.base_url is not None

    def create_client(self) -> ChatCompletionClient:
        """Build the client. Raises :class:`ModelConfigError` with what to set when incomplete."""
        if self.component is not None:
            try:
                return ChatCompletionClient.load_component(self.component)
            except Exception as exc:
                raise ModelConfigError(
                    f"cannot load the model component ({self.component.get('provider')}): {exc}"
                ) from exc
        prefix = "AGENT_MEMORY_" if self.role == "main" else "AGENT_MEMORY_MEMORY_"
        if not self.is_configured():
            raise ModelConfigError(f"No {'agent' if self.role == 'main' else 'memory'} model is configured.\n"
                                   + HOW_TO_CONFIGURE)  # fmt: skip
        if self.model is None:
            raise ModelConfigError(
                f"OPENAI_BASE_URL is set to {self.base_url} but no model name: set {prefix}MODEL "
                "(for example llama3.1 for Ollama)."
            )
        from autogen_ext.models.openai import OpenAIChatCompletionClient
        from autogen_ext.models.openai._model_info import get_info

        kwargs: dict[str, Any] = {"model": self.model, "api_key": self.api_key or "not-needed"}
        if self.base_url:
            kwargs["base_url"] = self.base_url
        info = self.model_info
        if info is None:
            try:
                get_info(self.model)
            except ValueError:
                if self.base_url is None:
                    raise ModelConfigError(
                        f"AutoGen does not know the OpenAI model {self.model!r}: check {prefix}MODEL, or describe "
                        f"it with {prefix}MODEL_INFO (JSON) or {prefix}MODEL_FAMILY / _FUNCTION_CALLING flags."
                    ) from None
                info = dict(_MODEL_INFO_DEFAULTS)  # a local model: sensible capabilities, overridable
        if info is not None:
            kwargs["model_info"] = ModelInfo(**info)  # type: ignore[typeddict-item]
        if self.api_key is None and self.base_url is None:
            raise ModelConfigError("OPENAI_API_KEY is not set.\n" + HOW_TO_CONFIGURE)
        return OpenAIChatCompletionClient(**kwargs)


def _model_info_from_env(env: Mapping[str, str], prefix: str) -> dict[str, Any] | None:
    info: dict[str, Any] = {}
    raw = env.get(f"{prefix}MODEL_INFO")
    if raw:
        parsed = _load_json_setting(f"{prefix}MODEL_INFO", raw)
        if not isinstance(parsed, dict):
            raise ModelConfigError(f"{prefix}MODEL_INFO must be a JSON object")
        info.update(parsed)
    if env.get(f"{prefix}MODEL_FAMILY"):
        info["family"] = env[f"{prefix}MODEL_FAMILY"]
    for flag in _BOOL_FLAGS:
        name = f"{prefix}MODEL_{flag.upper()}"
        if env.get(name):
            info[flag] = _parse_bool(name, env[name])
    if not info:
        return None
    unknown = set(info) - set(_MODEL_INFO_DEFAULTS)
    if unknown:
        raise ModelConfigError(
            f"{prefix}MODEL_INFO has unknown fields {sorted(unknown)}; allowed: {sorted(_MODEL_INFO_DEFAULTS)}"
        )
    return {**_MODEL_INFO_DEFAULTS, **info}


def load_model_client(env: Mapping[str, str] | None = None) -> ChatCompletionClient:
    """The agents' model client from the environment. Raises :class:`ModelConfigError` saying what to set."""
    return ModelSettings.from_env(env, "main").create_client()


def load_memory_model_client(env: Mapping[str, str] | None = None) -> ChatCompletionClient | None:
    """The optional lightweight memory model, or None when ``AGENT_MEMORY_MEMORY_MODEL[_CONFIG]`` is unset."""
    settings = ModelSettings.from_env(env, "memory")
    return settings.create_client() if settings.is_configured() else None
