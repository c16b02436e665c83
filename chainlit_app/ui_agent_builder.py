"""UIAgentBuilder: the agents' builder for the chat UI (seed 001, "Builder Update").

Its ``build_model_context`` gives every agent a :class:`~agent_memory.MemoryContext` for the logged-in user
and the current Chainlit thread, restored from PostgreSQL when the thread is resumed.
"""

from __future__ import annotations

from agent_memory.agents.model_config import ModelConfigError, load_model_client


def model_setup_problem() -> str | None:
    """``None`` when a model client can be built from the environment, else what to set (markdown)."""
    try:
        load_model_client()
    except ModelConfigError as exc:
        return (
            "**No model is configured, so the agents cannot run yet.**\n\n"
            f"```text\n{exc}\n```\n\n"
            "Set it in the environment of `agent-memory ui` and restart it. The memory inspector and the "
            "**Memories** / **Search** commands work without a model."
        )
    return None
