"""The README's commands are the ones CI runs and the ones that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    test_command = next(line for block in shell_blocks(readme) for line in block.splitlines() if "pytest" in line)
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_the_readme_names_every_error_code_and_lua_script_folder_ships():
    from redis_sessions import ErrorCode

    readme = (ROOT / "README.md").read_text()
    assert all(f"`{code.value}`" in readme for code in ErrorCode)
    assert "lua" in (ROOT / "pyproject.toml").read_text()
