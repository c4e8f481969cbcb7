#!/usr/bin/env bash
# The whole test command: type-check, lint, then every vitest project (unit, infra, integration).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "== tsc --noEmit"
npx tsc --noEmit -p .
echo "== biome check"
npx biome check .
echo "== vitest"
# cfn-lint for the template lint: the machine's, or provisioned into .tools/python.
. scripts/python-tools.sh cfn-lint
npx vitest run "$@"
