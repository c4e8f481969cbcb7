#!/usr/bin/env bash
# Runs a command with Node.js >= 22.18 first on PATH (it runs TypeScript sources without flags) and
# the project's dependencies installed.
# The machine's Node is used when new enough; otherwise Node 24 LTS is installed from the npm
# registry (the `node` package) into .tools/node24, which git ignores. Nothing is installed globally.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=18)?0:1)'
}

if ! node_ok; then
  local_bin="$root/.tools/node24/node_modules/.bin"
  if [ ! -x "$local_bin/node" ]; then
    echo "[with-node] Node $(node --version 2>/dev/null || echo none) is older than 22.18; installing Node 24 into .tools/node24" >&2
    npm install --prefix "$root/.tools/node24" --no-audit --no-fund --loglevel=error node@24 >&2
  fi
  export PATH="$local_bin:$PATH"
  node_ok || { echo "[with-node] could not provision Node >= 22.18" >&2; exit 1; }
fi

# Install dependencies when node_modules is missing or older than the lock file.
stamp="$root/node_modules/.installed-lock"
if [ ! -f "$stamp" ] || ! cmp -s "$root/package-lock.json" "$stamp"; then
  echo "[with-node] installing dependencies with npm ci (Node $(node --version))" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
  cp "$root/package-lock.json" "$stamp"
fi

exec "$@"
