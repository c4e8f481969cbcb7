/**
 * `npm run build` (and `prepack`): the package's JavaScript and declarations in dist/ — the
 * constructs (dist/lib), the Lambda code they bundle at the consumer's synth (dist/lambdas), the
 * command line (dist/cli) and the local Host it starts (dist/lambdas/local), with the files that
 * code reads at run time (the console's assets, the documentation pages, DynamoDB Local's launcher).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = `${root}dist`;
rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [`${root}node_modules/typescript/bin/tsc`, '-p', `${root}tsconfig.build.json`],
  {
    stdio: 'inherit',
  },
);
cpSync(`${root}lambdas/console/assets`, `${dist}/lambdas/console/assets`, { recursive: true });
cpSync(`${root}lambdas/docs/pages`, `${dist}/lambdas/docs/pages`, { recursive: true });
// `takoform dev`: DynamoDB Local's launcher, compiled once and committed (no javac needed).
cpSync(
  `${root}lambdas/local/standins/java/LocalhostDynamoDB.class`,
  `${dist}/lambdas/local/standins/java/LocalhostDynamoDB.class`,
);
process.stdout.write(`built ${dist}\n`);
