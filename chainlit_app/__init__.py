"""The agent-memory chat UI (Chainlit): ``agent-memory ui`` runs ``chainlit_app/app.py``.

Modules: ``runtime`` (one store and data layer per process), ``inspector`` (memory inspector page and its
authenticated JSON routes), ``render`` (agent events as Chainlit steps), ``ui_agent_builder``
(``UIAgentBuilder``: the agents' builder with a per-user, per-thread ``MemoryContext``), ``app`` (hooks).
This package imports Chainlit; the ``agent_memory`` library never does.
"""
