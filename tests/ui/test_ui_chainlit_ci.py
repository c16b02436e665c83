"""Chainlit's CI mode (`chainlit run --ci`, or ``CI=true``) and the model: its fake OpenAI key is no model.

``agent-memory ui`` never starts Chainlit in CI mode (the launcher drops ``CI``; covered end to end by the UI
tests, whose apps run with ``CI=true``). Here: the launcher's environment, and the app's guard for a direct
``chainlit run --ci``.
"""

from __future__ import annotations

import inspect

from agent_memory.cli._ui import chainlit_env
from chainlit_app.runtime import CHAINLIT_CI_FAKE_OPENAI_KEY, drop_chainlit_ci_key


def test_the_launcher_does_not_pass_ci_on_to_chainlit() -> None:
    env = chainlit_env({"CI": "true", "OPENAI_API_KEY": "sk-real"}, CHAINLIT_APP_ROOT="/srv/ui")
    assert env == {"OPENAI_API_KEY": "sk-real", "CHAINLIT_APP_ROOT": "/srv/ui"}


def test_the_fake_key_is_the_one_chainlits_ci_mode_sets() -> None:
    import chainlit.cli

    assert f'os.environ["OPENAI_API_KEY"] = "{CHAINLIT_CI_FAKE_OPENAI_KEY}"' in inspect.getsource(chainlit.cli)


def test_a_direct_chainlit_run_in_ci_mode_drops_chainlits_fake_key() -> None:
    environ = {"OPENAI_API_KEY": CHAINLIT_CI_FAKE_OPENAI_KEY}
    assert drop_chainlit_ci_key(environ, ci_mode=True)
    assert environ == {}  # so the chat says what to set, as with no key at all


def test_a_real_key_is_kept_in_ci_mode_and_the_fake_one_outside_it() -> None:
    real = {"OPENAI_API_KEY": "sk-real"}
    assert not drop_chainlit_ci_key(real, ci_mode=True)
    fake_without_ci = {"OPENAI_API_KEY": CHAINLIT_CI_FAKE_OPENAI_KEY}
    assert not drop_chainlit_ci_key(fake_without_ci, ci_mode=False)
    assert real == {"OPENAI_API_KEY": "sk-real"}
    assert fake_without_ci == {"OPENAI_API_KEY": CHAINLIT_CI_FAKE_OPENAI_KEY}
