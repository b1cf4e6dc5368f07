"""Bad arguments and bad settings are the CLI's one coded line, ``session.input.invalid``,
exit 2: every number, duration and cursor (NaN, infinities, negatives, non-ASCII
digits, absurdly large values), and redis-py options of the wrong type.

The argument cases run ``main`` in this process with a URL nobody listens on: a value
the parser let through would go on to fail there (exit 3), or as ``internal`` (exit 4).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from redis_sessions.cli import main
from test_cli import ENV, assert_one_line_error, cli, closed_port

pytestmark = [pytest.mark.slow]

CENTURY = 100 * 365 * 24 * 3600
HUGE = "9" * 5000

BAD_ARGUMENTS = {
    "--idle-older-than": [["purge", "--dry-run", "--idle-older-than", v] for v in (
        "nan", "NaN", "inf", "-inf", "-1", "1e309", "1e3", "١٢", "１", "1_000", " 5", "", str(CENTURY + 1), HUGE)],
    "--cursor": [["list", "threads", "--cursor", v] for v in (
        "²:0", "0:²", "0:-1", f"0:{2**64}", "x", "0:1:2", "0:0:0:%FF", "0:0:0:a b", "0:0:0:a:1:2", "", "0:" + HUGE)],
    "--limit": [["list", "responses", "--limit", v] for v in ("0", "-1", "10001", "２", "nan", "1.5", HUGE)]
               + [["items", "s", "--limit", "0"], ["conversation", "conv_x", "--limit", "101"]],
    "--max-depth": [["chain", "resp_x", "--max-depth", v] for v in ("0", "100001", "²", "inf")],
    "--sample": [["stats", "--sample", v] for v in ("-1", "nan", "1000001", "٣")],
    "--workers": [["demo", "--workers", v] for v in ("0", "101", "٣", HUGE)],
    "--conversations": [["demo", "--conversations", "10001"]],
    "--turns": [["demo", "--turns", "1001"]],
    "--ttl": [["demo", "--ttl", v] for v in ("0", "nan", str(CENTURY + 1))],
    "--seed": [["demo", "--seed", v] for v in ("-1", "x", "²")],
    "required": [["chain"]],
}
CASES = [pytest.param(name, argv, id=f"{' '.join(argv)[:40]}") for name, cases in BAD_ARGUMENTS.items()
         for argv in cases]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit:
        code = int(exit.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name, argv", CASES)
def test_a_bad_argument_is_input_invalid_and_exit_2(name: str, argv: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    nowhere = ["--url", f"redis://127.0.0.1:{closed_port()}/0", "--prefix", "input"]
    code, out, err = run_main([*argv, *nowhere], capsys)
    assert (code, out) == (2, ""), err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: session.input.invalid: "), err
    assert name in lines[0] or name == "required", err

    code, out, err = run_main([*argv, *nowhere, "--json"], capsys)
    assert (code, out) == (2, "")
    assert json.loads(err)["error"]["code"] == "session.input.invalid"


@pytest.mark.real
def test_the_reported_arguments_exit_2_on_a_server(redis_server: Any) -> None:
    args = ["--url", redis_server.url, "--prefix", "input"]
    for argv in (["purge", "--idle-older-than", "nan", "--dry-run"], ["list", "threads", "--cursor", "²:0"],
                 ["list", "threads", "--cursor", "1:0"]):  # a standalone server has one node: 0
        result = cli(*argv, *args)
        assert_one_line_error(result, 2)
        assert result.stderr.startswith("error: session.input.invalid: ") and "--" in result.stderr


@pytest.mark.real
@pytest.mark.parametrize("kwargs", ['{"socket_timeout": "abc"}', '{"socket_keepalive_options": 5}'])
def test_a_redis_option_of_the_wrong_type_is_input_invalid(redis_server: Any, kwargs: str) -> None:
    """Needs the library to refuse such values when it builds a client (issue 39, row 9)."""
    env = {**ENV, "REDIS_SESSIONS_URL": redis_server.url, "REDIS_SESSIONS_REDIS_KWARGS": kwargs}
    for argv in (["stats"], ["list", "threads"], ["show", "resp_x"]):
        result = cli(*argv, env=env)
        assert_one_line_error(result, 2)
        assert result.stderr.startswith("error: session.input.invalid: "), result.stderr
        as_json = cli(*argv, "--json", env=env)
        assert as_json.returncode == 2 and json.loads(as_json.stderr)["error"]["code"] == "session.input.invalid"
