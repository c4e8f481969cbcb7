#!/usr/bin/env bash
# The Python tools of the tests, found or provisioned as scripts/with-node.sh provisions Node:
#   cfn-lint        lints the synthesized templates (npm test)
#   moto_server     the AWS emulator of the single-endpoint run (npm run test:moto, .ci/run)
# Sourced (`. scripts/python-tools.sh [cfn-lint] [moto]`), it exports CFN_LINT and MOTO_SERVER;
# run (`bash scripts/python-tools.sh moto -- node …`), it exports them for the command it runs.
# A tool already named by that variable, or on PATH, is used as it is. A missing one is
# installed, at the version pinned below, from PyPI into a virtual environment in
# .tools/python (which git ignores) when Python 3 is there; nothing is installed globally.
# Without Python 3 it says what to install and returns 1.

CFN_LINT_PIN="cfn-lint==1.51.0"
MOTO_PIN="moto[server]==5.2.1"

_pt_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_pt_venv="$_pt_root/.tools/python"

_pt_works() { "$@" >/dev/null 2>&1; }

# A usable command for one tool: the variable's, PATH's, or the venv's; empty when none.
_pt_find() { # variable command probe-arg
  local given="${!1:-}"
  if [ -n "$given" ] && _pt_works "$given" "$3"; then echo "$given"; return; fi
  if _pt_works "$2" "$3"; then command -v "$2"; return; fi
  if [ -x "$_pt_venv/bin/$2" ] && _pt_works "$_pt_venv/bin/$2" "$3"; then echo "$_pt_venv/bin/$2"; fi
}

# Installs the given pinned packages into the venv (created first when missing).
_pt_install() {
  if ! command -v python3 >/dev/null 2>&1; then
    echo "[python-tools] Python 3 is needed for $* (Debian/Ubuntu: apt-get install -y python3 python3-venv)" >&2
    return 1
  fi
  if [ ! -x "$_pt_venv/bin/pip" ]; then
    echo "[python-tools] creating a Python virtual environment in .tools/python" >&2
    rm -rf "$_pt_venv"
    if ! python3 -m venv "$_pt_venv" >&2; then
      echo "[python-tools] python3 -m venv failed (Debian/Ubuntu: apt-get install -y python3-venv)" >&2
      return 1
    fi
  fi
  echo "[python-tools] installing $* into .tools/python" >&2
  if ! "$_pt_venv/bin/pip" install --disable-pip-version-check --quiet "$@" >&2; then
    echo "[python-tools] pip could not install $* (PyPI must be reachable; or install them yourself and put them on PATH, or set CFN_LINT / MOTO_SERVER)" >&2
    return 1
  fi
}

python_tools() {
  local want=("$@") missing=() tool
  [ ${#want[@]} -gt 0 ] || want=(cfn-lint moto)
  for tool in "${want[@]}"; do
    case "$tool" in
      cfn-lint) CFN_LINT="$(_pt_find CFN_LINT cfn-lint --version)"; [ -n "$CFN_LINT" ] || missing+=("$CFN_LINT_PIN") ;;
      moto) MOTO_SERVER="$(_pt_find MOTO_SERVER moto_server --help)"; [ -n "$MOTO_SERVER" ] || missing+=("$MOTO_PIN") ;;
      *) echo "[python-tools] unknown tool $tool" >&2; return 2 ;;
    esac
  done
  local rc=0
  if [ ${#missing[@]} -gt 0 ]; then
    _pt_install "${missing[@]}" || rc=1
    for tool in "${want[@]}"; do
      case "$tool" in
        cfn-lint) CFN_LINT="$(_pt_find CFN_LINT cfn-lint --version)" ;;
        moto) MOTO_SERVER="$(_pt_find MOTO_SERVER moto_server --help)" ;;
      esac
    done
  fi
  # Only what was found: an empty MOTO_SERVER would read as "set" to the scripts that use it.
  if [ -n "${CFN_LINT:-}" ]; then export CFN_LINT; else unset CFN_LINT; fi
  if [ -n "${MOTO_SERVER:-}" ]; then export MOTO_SERVER; else unset MOTO_SERVER; fi
  return $rc
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  python_tools "$@"
else
  # Run as a command: `bash scripts/python-tools.sh TOOL… -- COMMAND…` provisions, then runs COMMAND.
  set -euo pipefail
  tools=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do tools+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  python_tools "${tools[@]}"
  [ $# -eq 0 ] || exec "$@"
fi
