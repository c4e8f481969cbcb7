#!/usr/bin/env bash
# The whole test command: type-check, lint, then every vitest project (unit, infra, integration).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "== tsc --noEmit"
npx tsc --noEmit -p .
echo "== biome check"
npx biome check .
echo "== vitest"
npx vitest run "$@"
