#!/usr/bin/env bash
# The test command (README): installs what the tests need, then runs them (3 to 4.5 min
# of tests on 2 cores, after the installs).
#   bash scripts/test.sh [pytest args...]
# - Debian's Nsight Systems 2022.4 (non-free) for the real end-to-end tests of `nsyswrap run`
#   on the CPU, when this machine can install it (root + apt); otherwise those tests skip,
#   unless NSYSWRAP_REQUIRE_NSYS=1 (CI), which makes a missing nsys an error.
# - Debian's Chromium (and a font) for the browser tests of the HTML report, driven headless by
#   Playwright for Python (a test extra), which uses that Chromium and downloads no browser;
#   without them those tests skip, unless NSYSWRAP_REQUIRE_BROWSER=1 (CI).
# - a virtual environment (.venv-test) with nsyswrap installed with its test extras, and
#   PyTorch's CPU build when it can be installed; its tests skip without it, unless
#   NSYSWRAP_REQUIRE_TORCH=1 (CI), which makes a failed install an error.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nsys >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # Nsight Systems is in Debian's non-free component: add contrib and non-free to the
    # machine's own Debian entries (deb822 .sources and one-line sources.list), never a new
    # package host of our own.
    if ! grep -rqsE "^(Components:|deb ).*non-free" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      for f in /etc/apt/sources.list.d/*.sources; do
        if [ -f "$f" ] && grep -q "^URIs:.*debian" "$f"; then
          sed -i -E '/^Components:/{/non-free/!s/$/ contrib non-free/}' "$f"
        fi
      done
      if [ -f /etc/apt/sources.list ]; then
        sed -i -E '/^deb .*debian/{/non-free/!s/$/ contrib non-free/}' /etc/apt/sources.list
      fi
    fi
    echo "scripts/test.sh: installing Nsight Systems from Debian non-free (once)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nsight-systems nsight-systems-target \
      gcc >/dev/null
  else
    echo "scripts/test.sh: nsys not installed and cannot install it here: the end-to-end" \
         "tests of nsyswrap run will be skipped"
  fi
fi

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # Debian main, from the machine's own package sources.
    echo "scripts/test.sh: installing Chromium for the HTML report's browser tests (once)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
      fonts-dejavu-core >/dev/null
  else
    echo "scripts/test.sh: chromium not installed and cannot install it here: the browser" \
         "tests of the HTML report will be skipped"
  fi
fi

# What the installs below were made from: when a later run finds the same (this script,
# pyproject.toml, the checkout's place, the Python), it skips them (~10 s of pip that finds
# everything in place). Written only after every install succeeded, so a failed one is
# tried again next time.
stamp=$( { cat scripts/test.sh pyproject.toml; echo "$PWD"; python3 --version; } | sha256sum \
  | cut -d' ' -f1)
install() {  # returns 1 where an optional part could not be installed
  local complete=0 py312_job=""
  # The trace of the program's lines needs Python 3.12+ (sys.monitoring): where one is on this
  # machine, a small environment of it with the nvtx package (.venv-test312) runs the runner's
  # side end to end under nsys (tests/test_line_trace.py); without it those tests skip. Made
  # on its own meanwhile (~5 s; a venv apart, so no pip shares its files with the others).
  py312=""
  for candidate in python3.12 python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.monitoring' 2>/dev/null; then
      py312=$candidate; break
    fi
  done
  if [ -n "$py312" ]; then
    { { [ -x .venv-test312/bin/python ] || "$py312" -m venv .venv-test312; } \
        && .venv-test312/bin/python -m pip install -q nvtx; } &
    py312_job=$!
  fi
  # Called as a condition, where `set -e` does not apply: each step stops the script itself.
  python3 -m venv .venv-test || exit 1
  . .venv-test/bin/activate || exit 1
  python -m pip install -q --upgrade pip || exit 1
  # --no-compile: pip would compile every module of every package (torch's, sympy's, dask's)
  # to bytecode, 22 of a fresh install's 49 s; the tests import a small part of them, which
  # Python compiles on first import (into PYTHONPYCACHEPREFIX below, under 1 s).
  python -m pip install -q --no-compile -e '.[test]' || exit 1
  # PyTorch (CPU) for the torchrun per-rank tests, the harness's no-GPU error path and the
  # runner's Timer hook; pinned to the build this project's machines keep on disk. Without it
  # those tests skip, unless NSYSWRAP_REQUIRE_TORCH=1 (CI), which makes a failed install an error.
  torch_log=$(mktemp)
  if ! python -m pip install -q --no-compile 'torch==2.13.0' 2>"$torch_log"; then
    if [ -n "${NSYSWRAP_REQUIRE_TORCH:-}" ]; then
      tail -n 5 "$torch_log" >&2
      rm -f "$torch_log"
      echo "scripts/test.sh: torch 2.13.0 could not be installed and NSYSWRAP_REQUIRE_TORCH is" \
           "set: failing" >&2
      exit 1
    fi
    echo "scripts/test.sh: torch 2.13.0 not installable here: the tests that need it will be" \
         "skipped"
    complete=1
  fi
  rm -f "$torch_log"
  # Never fatal: without it the tests that need it skip.
  if [ -n "$py312_job" ] && ! wait "$py312_job"; then
    echo "scripts/test.sh: no environment of $py312 with the nvtx package: the end-to-end" \
         "test of the trace of lines will be skipped"
    complete=1
  fi
  return $complete
}
if [ -f .venv-test/installed ] && [ "$(cat .venv-test/installed)" = "$stamp" ] \
    && .venv-test/bin/python -c 'import importlib.metadata as m, pytest, xdist; m.version("nsyswrap")' \
      2>/dev/null; then
  . .venv-test/bin/activate
else
  rm -f .venv-test/installed
  if install; then
    echo "$stamp" > .venv-test/installed
  fi
fi
# Compiled bytecode kept (in .venv-test/pycache, not beside the sources), even where the
# environment says not to write it (PYTHONDONTWRITEBYTECODE): every `python -m nsyswrap` the
# tests start would compile nsyswrap again, and every worker rewrite the tests' asserts
# (8 s of each worker's collection, 3 s with the cache).
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$PWD/.venv-test/pycache"
# Four workers on two cores: the nsys tests spend about half their time waiting on nsys,
# and the others a third of theirs on programs they start (back to back, 4 min 1 s of tests
# against 4 min 32 s with three). The nsys tests are one group in one worker, which lowers
# the others' CPU priority (tests/conftest.py): one nsys 2022.4 session at a time, first in
# line for the cores, and three workers that run the other tests meanwhile.
python -m pytest -n 4 --dist loadgroup "$@"
