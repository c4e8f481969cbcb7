/**
 * The integration suite in its single-endpoint mode (OPS-03, `TAKOFORM_LOCALSTACK_ENDPOINT`)
 * against moto_server: an AWS emulator independent of DynamoDB Local and fauxqs, reached through
 * one endpoint as LocalStack is. Starts moto on a free 127.0.0.1 port, runs the files of
 * test/support/single-endpoint-files.ts there (or the test files given; other arguments go to
 * vitest), and stops moto by
 * its PID. moto's own request log goes to test-results/moto.log.
 *
 *   npm run test:moto                      # MOTO_SERVER names another binary
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, spawnStandIn, stopChild, waitUntil } from '../lambdas/local/standins/child-process.ts';
import { SINGLE_ENDPOINT_FILES } from '../test/support/single-endpoint-files.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const motoBinary = process.env.MOTO_SERVER ?? 'moto_server';

async function startMoto() {
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const { child, exited, stderrTail } = spawnStandIn(motoBinary, ['-H', '127.0.0.1', '-p', String(port)]);
  mkdirSync(path.join(root, 'test-results'), { recursive: true });
  const log = createWriteStream(path.join(root, 'test-results', 'moto.log'));
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  // moto's dashboard answers once its Flask app serves; it exists on moto only.
  await waitUntil('moto_server', async () => (await fetch(`${endpoint}/moto-api/`)).ok, {
    timeoutMs: 30_000,
    exited,
    diagnostics: stderrTail,
  }).catch(async (err) => {
    await stopChild(child, exited);
    throw err;
  });
  return { endpoint, pid: child.pid as number, stop: () => stopChild(child, exited) };
}

async function main(): Promise<number> {
  const started = Date.now();
  const args = process.argv.slice(2);
  const files = args.filter((a) => a.endsWith('.test.ts'));
  const moto = await startMoto();
  process.stdout.write(`[single-endpoint] moto_server pid ${moto.pid} at ${moto.endpoint}\n`);
  const stopMoto = () => void moto.stop();
  process.once('SIGINT', stopMoto);
  process.once('SIGTERM', stopMoto);
  try {
    const vitest = spawn(
      'npx',
      ['vitest', 'run', '--project', 'integration', ...(files.length ? [] : SINGLE_ENDPOINT_FILES), ...args],
      {
        cwd: root,
        stdio: 'inherit',
        env: {
          ...process.env,
          TAKOFORM_LOCALSTACK_ENDPOINT: moto.endpoint,
          TAKOFORM_ENDPOINT_EMULATOR: 'moto',
          TAKOFORM_SUMMARY_LABEL: 'Single-endpoint (moto)',
        },
      },
    );
    const [code] = (await once(vitest, 'exit')) as [number | null];
    return code ?? 1;
  } finally {
    await moto.stop();
    process.stdout.write(
      `[single-endpoint] moto_server stopped; ${Math.round((Date.now() - started) / 1000)} s in all\n`,
    );
  }
}

process.exitCode = await main();
