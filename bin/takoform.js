#!/usr/bin/env node
// `takoform`, the package's command. Installed (npm i -g, npx -p), it runs the compiled command
// line in dist/cli with the Node that started it; in a clone, where dist/ may be missing or stale,
// it hands over to bin/takoform, which runs the TypeScript sources with a provisioned Node 24.
// Kept to syntax every Node since 14 parses, so an old Node reaches the version check below.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const MIN = [22, 12];

if (existsSync(`${root}cli/main.ts`)) {
  const clone = spawnSync('bash', [`${root}bin/takoform`, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(clone.status === null ? 1 : clone.status);
}

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < MIN[0] || (major === MIN[0] && minor < MIN[1])) {
  process.stderr.write(
    `takoform: needs Node.js ${MIN.join('.')} or newer; this is ${process.version}.\n` +
      'Install a current Node.js (https://nodejs.org, or nvm install 24) and run takoform again.\n',
  );
  process.exit(2);
}

const { main } = await import('../dist/cli/main.js');
process.exitCode = await main(process.argv.slice(2));
