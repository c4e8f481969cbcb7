import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readyPort, type StandIn, spawnStandIn, stopChild } from './child-process.ts';

// `.ts` in a clone, `.js` in the package (`takoform dev`): the entry is beside this file.
const self = fileURLToPath(import.meta.url);
const entry = path.join(path.dirname(self), `sqs-server-main${path.extname(self)}`);

/** Starts the SQS stand-in in its own process, on 127.0.0.1; persistent when `dataDir` is set. */
export async function startSqsServer(opts: { dataDir?: string; port?: number } = {}): Promise<StandIn> {
  const args = [entry];
  if (opts.dataDir) {
    mkdirSync(opts.dataDir, { recursive: true });
    args.push('--data-dir', opts.dataDir);
  }
  if (opts.port) args.push('--port', String(opts.port));
  const spawned = spawnStandIn(process.execPath, args);
  const { child, exited } = spawned;
  const port = await readyPort('SQS stand-in', spawned, { timeoutMs: 30_000 });
  return {
    name: 'sqs',
    endpoint: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    exited,
    stop: () => stopChild(child, exited),
  };
}
