import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { type StandIn, spawnStandIn, stopChild } from './child-process.ts';

const entry = path.join(path.dirname(fileURLToPath(import.meta.url)), 'sqs-server-main.ts');

/** Starts the SQS stand-in in its own process, on 127.0.0.1; persistent when `dataDir` is set. */
export async function startSqsServer(opts: { dataDir?: string; port?: number } = {}): Promise<StandIn> {
  const args = [entry];
  if (opts.dataDir) {
    mkdirSync(opts.dataDir, { recursive: true });
    args.push('--data-dir', opts.dataDir);
  }
  if (opts.port) args.push('--port', String(opts.port));
  const { child, exited, stderrTail } = spawnStandIn(process.execPath, args);
  const lines = createInterface({ input: child.stdout! });
  const timeout = AbortSignal.timeout(30_000);
  const ready = (async () => {
    for await (const line of lines) {
      const parsed = JSON.parse(line) as { port: number };
      return parsed.port;
    }
    throw new Error('SQS stand-in closed its output before it was ready');
  })();
  const died = exited.then(() => {
    throw new Error(`SQS stand-in exited during start-up:\n${stderrTail()}`);
  });
  const late = once(timeout, 'abort').then(() => {
    throw new Error(`SQS stand-in was not ready after 30 s:\n${stderrTail()}`);
  });
  // Only the first outcome matters; the others must not surface later as unhandled rejections.
  for (const p of [ready, died, late]) p.catch(() => {});
  let port: number;
  try {
    port = await Promise.race([ready, died, late]);
  } catch (err) {
    await stopChild(child, exited);
    throw err;
  }
  lines.on('line', () => {});
  return {
    name: 'sqs',
    endpoint: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    exited,
    stop: () => stopChild(child, exited),
  };
}
