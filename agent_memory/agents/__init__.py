"""Agents on the two-layer memory: CodeAgent, the executor, AgentBuilder and model configuration.

Example:
    >>> from agent_memory.agents import AgentBuilder, TeamSpec
    >>> TeamSpec().code_agent.name
    'coder'
"""

from .builder import AgentBuilder, AgentSession
from .code_agent import CODE_AGENT_SYSTEM_MESSAGE, CodeAgent
from .events import MemoryContextEvent, MemoryStoredEvent
from .executor import ExecutionResult, ExecutorAgent, LocalProcessGroupExecutor
from .model_config import ModelConfigError, ModelSettings, load_memory_model_client, load_model_client
from .spec import DEFAULT_TEAM_SPEC, CodeAgentSpec, ContextSpec, ExecutorSpec, TeamSpec

__all__ = [
    "CODE_AGENT_SYSTEM_MESSAGE",
    "DEFAULT_TEAM_SPEC",
    "AgentBuilder",
    "AgentSession",
    "CodeAgent",
    "CodeAgentSpec",
    "ContextSpec",
    "ExecutionResult",
    "ExecutorAgent",
    "ExecutorSpec",
    "LocalProcessGroupExecutor",
    "MemoryContextEvent",
    "MemoryStoredEvent",
    "ModelConfigError",
    "ModelSettings",
    "TeamSpec",
    "load_memory_model_client",
    "load_model_client",
]
