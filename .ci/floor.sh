#!/usr/bin/env bash
# CI, floor job: run the test suite once with the *lowest* versions of the
# runtime dependencies that pyproject.toml allows, so a floor that the suite
# does not pass with fails CI instead of a user's install.
#
# The pins are derived from [project].dependencies: every "name>=X" becomes
# "name==X" in a pip constraints file, so raising a floor in pyproject.toml is
# the only edit ever needed. A floor that the test extra cannot be installed
# with (e.g. pydantic below what openai-agents requires) fails here at install
# time, which is the point.
#
# usage: floor.sh [SOURCE_DIR]      (default: the current git checkout)
# env:   FLOOR_VENV (default SOURCE_DIR/.venv-floor), CI (default true: skips fail)
# .ci/run calls it after the main run.
set -euo pipefail
SRC="$(cd "${1:-$(git rev-parse --show-toplevel)}" && pwd)"
cd "$SRC"
export CI="${CI:-true}"
VENV="${FLOOR_VENV:-$SRC/.venv-floor}"
start=$SECONDS

python3 -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install -q -U pip

# pyproject.toml "name>=X" floors -> constraints "name==X" (anything without a
# ">=" floor is left to the resolver).
"$VENV/bin/python" - "$VENV/floor-constraints.txt" <<'PY'
import re, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
pins = []
for dep in deps:
    m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*>=\s*([^,;\s]+)\s*(,[^;]*)?(;.*)?", dep)
    if m:
        pins.append(f"{m.group(1)}=={m.group(3)}{m.group(5) or ''}")
open(sys.argv[1], "w").write("\n".join(pins) + "\n")
PY
echo "ci-floor: constraints"; sed 's/^/  /' "$VENV/floor-constraints.txt"

"$VENV/bin/pip" install -q -c "$VENV/floor-constraints.txt" -e '.[test]'
"$VENV/bin/pip" check

# Prove the floors are what got installed (a constraint cannot silently lose).
"$VENV/bin/python" - "$VENV/floor-constraints.txt" <<'PY'
import sys
from importlib.metadata import version
from packaging.version import Version
bad = []
for line in filter(None, open(sys.argv[1]).read().splitlines()):
    name, want = line.split(";")[0].strip().split("==")
    got = version(name)
    print(f"  {name}=={got}")
    if Version(got) != Version(want):
        bad.append(f"{name}: want {want}, got {got}")
sys.exit("ci-floor: " + "; ".join(bad) if bad else 0)
PY

"$VENV/bin/python" -m pytest -q -p no:cacheprovider
echo "ci-floor: done in $((SECONDS - start))s"
