#!/usr/bin/env bash
# `npm run integ:cdk [test/integ/integ.NAME.ts …]`: each integration app deployed with this
# project's CDK CLI, then destroyed. Its assertion stack runs the assertions while it deploys;
# a wait that never sees its expected answer fails the deployment, and so the run. The same apps
# run under `npm run integ` (integ-runner), which also keeps snapshots; this is the way when the
# installed integ-runner cannot read the CDK library's cloud assembly (docs/integ-tests.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
apps=("$@")
[ ${#apps[@]} -gt 0 ] || apps=(test/integ/integ.*.ts)
status=0
for app in "${apps[@]}"; do
  out="cdk.out/integ/$(basename "$app" .ts)"
  echo "== $app: deploying the Host stack and its assertions"
  if npx cdk --app "node $app" -o "$out" deploy --all --require-approval never; then
    echo "== $app: passed"
  else
    echo "== $app: FAILED (see the assertion stack's events)"
    status=1
  fi
  npx cdk --app "node $app" -o "$out" destroy --all --force || status=1
done
exit $status
