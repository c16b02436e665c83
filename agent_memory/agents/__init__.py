"""Agents on the two-layer memory: CodeAgent, the executor, AgentBuilder and model configuration.

Example:
    >>> from agent_memory.agents import AgentBuilder, TeamSpec
    >>> TeamSpec().code_agent.name
    'coder'
"""

from ._actors import (
    CancelRun,
    ExecutorActor,
    RemoteCodeExecutor,
    RemoteExecutorUnavailable,
    RunCodeRequest,
    RunCodeResult,
    RunProgress,
    add_serializers,
    connect_executor_runtime,
    executor_type,
    grpc_runtime,
    shard_of,
)
from ._builder import AgentBuilder, AgentSession, has_code_block
from ._code_agent import CODE_AGENT_SYSTEM_MESSAGE, CodeAgent
from ._events import CodeProgressEvent, MemoryContextEvent, MemoryStoredEvent
from ._executor import ExecutionResult, ExecutorAgent, LocalProcessGroupExecutor
from ._model_config import ModelConfigError, ModelSettings, load_memory_model_client, load_model_client
from ._runtime_tls import RuntimeTLS, RuntimeTLSError, make_certificates, runtime_host, tls_from_env
from ._sandbox import IsolationReport, SandboxPolicy, SandboxUnavailable, isolation_report, sandbox_uid
from ._session_actor import (
    SESSION_MESSAGE_TYPES,
    CloseSession,
    LocalSessions,
    RemoteAgentSession,
    SessionActor,
    StartTurn,
    StopTurn,
    TurnEnded,
    TurnEvent,
    session_key,
    session_type,
)
from ._skills_hook import HINT_HEADER, SkillHints, SkillsAgentBuilder, fix_description, learn_from_run
from ._spec import DEFAULT_TEAM_SPEC, CodeAgentSpec, ContextSpec, ExecutorSpec, TeamSpec
from ._workspace import RemovedFiles, forget_user_files, safe_path_part, user_work_root

__all__ = [
    "CODE_AGENT_SYSTEM_MESSAGE",
    "DEFAULT_TEAM_SPEC",
    "HINT_HEADER",
    "SESSION_MESSAGE_TYPES",
    "AgentBuilder",
    "AgentSession",
    "CancelRun",
    "CloseSession",
    "CodeAgent",
    "CodeAgentSpec",
    "CodeProgressEvent",
    "ContextSpec",
    "ExecutionResult",
    "ExecutorActor",
    "ExecutorAgent",
    "ExecutorSpec",
    "IsolationReport",
    "LocalProcessGroupExecutor",
    "LocalSessions",
    "MemoryContextEvent",
    "MemoryStoredEvent",
    "ModelConfigError",
    "ModelSettings",
    "RemoteAgentSession",
    "RemoteCodeExecutor",
    "RemoteExecutorUnavailable",
    "RemovedFiles",
    "RunCodeRequest",
    "RunCodeResult",
    "RunProgress",
    "RuntimeTLS",
    "RuntimeTLSError",
    "SandboxPolicy",
    "SandboxUnavailable",
    "SessionActor",
    "SkillHints",
    "SkillsAgentBuilder",
    "StartTurn",
    "StopTurn",
    "TeamSpec",
    "TurnEnded",
    "TurnEvent",
    "add_serializers",
    "connect_executor_runtime",
    "executor_type",
    "fix_description",
    "forget_user_files",
    "grpc_runtime",
    "has_code_block",
    "isolation_report",
    "learn_from_run",
    "load_memory_model_client",
    "load_model_client",
    "make_certificates",
    "runtime_host",
    "safe_path_part",
    "sandbox_uid",
    "session_key",
    "session_type",
    "shard_of",
    "tls_from_env",
    "user_work_root",
]
