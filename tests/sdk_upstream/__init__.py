"""The OpenAI Agents SDK's own RedisSession tests, run against redis_sessions.RedisSession.

A package so that its conftest is ``sdk_upstream.conftest`` and never shadows
``tests/conftest.py``, which other test modules import as ``conftest``.
"""
