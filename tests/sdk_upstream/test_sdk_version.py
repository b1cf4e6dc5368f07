"""The vendored SDK tests are openai-agents 0.24.0's: an upgrade must re-vendor them."""

from __future__ import annotations

from importlib.metadata import version

from sdk_upstream.conftest import VENDORED_VERSION


def test_the_installed_agents_sdk_is_the_vendored_version() -> None:
    installed = version("openai-agents")
    assert installed == VENDORED_VERSION, (
        f"openai-agents {installed} is installed but tests/sdk_upstream holds {VENDORED_VERSION}'s tests: copy "
        "tests/extensions/memory/test_redis_session.py and tests/test_responses.py from the new sdist (changing "
        "only the RedisSession import), review EXCLUDED in tests/sdk_upstream/conftest.py, then VENDORED_VERSION"
    )
