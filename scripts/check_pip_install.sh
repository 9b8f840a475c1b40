#!/usr/bin/env bash
# Checks the one command the README gives Python users, `pip install --no-build-isolation .`: in a fresh virtual
# environment that sees the system's site packages (numpy, pybind11, setuptools: Debian's python3-numpy,
# python3-pybind11, python3-setuptools), installs the package from this source tree, imports it from outside the
# tree, checks that it is the installed copy (extension, stubs, py.typed), and runs the pytest suite (tests/python)
# against it.
# Usage: scripts/check_pip_install.sh [VENV_DIR]    (default: a temporary folder, removed at the end)
# Environment: PYTHON (default /usr/bin/python3 when present, else python3), NPY_NUM_BUILD_JOBS (parallel compile
# jobs of the extension, default 2), CHECK_PIP_PYTEST (1 = run tests/python after the import check, the default;
# 0 = import check only).
# Exit codes: 0 passed, 1 failed, 77 skipped (no venv module, no pip in the environment, or no pybind11/setuptools
# for a build without isolation), so that ctest can report a skip.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi
skip() { echo "check_pip_install.sh: skipped: $*" >&2; exit 77; }
command -v "$python" >/dev/null || skip "no $python"
"$python" -c "import venv, ensurepip" 2>/dev/null || skip "$python has no venv/ensurepip module (Debian: python3-venv)"
"$python" -c "import pybind11, setuptools, numpy" 2>/dev/null ||
  skip "$python lacks pybind11, setuptools or numpy (Debian: python3-pybind11 python3-setuptools python3-numpy)"

if [ $# -ge 1 ]; then
  venv=$1
  rm -rf "$venv"
else
  venv=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-pip-check.XXXXXX")
  trap 'rm -rf "$venv"' EXIT
fi
"$python" -m venv --system-site-packages "$venv" || skip "python -m venv failed"
"$venv/bin/python" -m pip --version >/dev/null 2>&1 || skip "no pip in the virtual environment"

echo "check_pip_install.sh: pip install --no-build-isolation $root into $venv" >&2
start=$(date +%s)
(cd "$root" && NPY_NUM_BUILD_JOBS=${NPY_NUM_BUILD_JOBS:-2} "$venv/bin/python" -m pip install --no-build-isolation \
   --no-deps --disable-pip-version-check -q .)
echo "check_pip_install.sh: installed in $(( $(date +%s) - start )) s" >&2

# Import from a folder outside the source tree, so that only the installed package can be found.
outside=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-pip-import.XXXXXX")
(cd "$outside" && "$venv/bin/python" - "$venv" <<'EOF'
import pathlib
import sys

import numpy as np

import attnscope

venv = pathlib.Path(sys.argv[1]).resolve()
package = pathlib.Path(attnscope.__file__).resolve().parent
assert venv in package.parents, f"attnscope imported from {package}, not from the virtual environment {venv}"
assert list(package.glob("_attnscope*.so")), f"no compiled extension in {package}"
for stub in ["__init__.pyi", "text.pyi", "analysis.pyi", "py.typed"]:
    assert (package / stub).exists(), f"{stub} was not installed"
# one call into the extension: a softmax row sums to 1
row = attnscope.softmax(np.array([[0.5, -1.0, 2.0]]))
assert abs(float(np.asarray(row).sum()) - 1.0) < 1e-12, row
print(f"check_pip_install.sh: imported attnscope from {package}")
EOF
)
rmdir "$outside"

if [ "${CHECK_PIP_PYTEST:-1}" = 1 ]; then
  "$venv/bin/python" -c "import pytest" 2>/dev/null || skip "installed and imported; no pytest to run tests/python"
  (cd "$root" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python)
fi
echo "check_pip_install.sh: passed" >&2
