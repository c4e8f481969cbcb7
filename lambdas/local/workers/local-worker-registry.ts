import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ID_PATTERN } from '../../engine/ids.ts';
import type { HandlerName, WorkerCode, WorkerRegistry } from '../../forms/module-worker/worker-registry.ts';

const HANDLERS: readonly HandlerName[] = ['fetch', 'scheduled', 'queue'];

export interface WorkerConfig {
  vars?: Record<string, unknown>;
  queueProducers?: Record<string, { queue: string }>;
}

/** Loads the module in a throw-away thread: worker code never runs inside the Host's own thread. */
const INTROSPECT = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.url).then(
  (m) => {
    const d = m.default;
    const plain = d !== null && typeof d === 'object' && !Array.isArray(d);
    // Own data properties only: a getter is never run, an inherited method never counts (MW-02).
    const declared = (n) => {
      const p = Object.getOwnPropertyDescriptor(d, n);
      return p !== undefined && 'value' in p && typeof p.value === 'function';
    };
    const handlers = plain ? workerData.names.filter(declared) : null;
    parentPort.postMessage({ handlers });
  },
  () => parentPort.postMessage({ handlers: null }),
);`;

async function declaredHandlers(file: string, timeoutMs: number): Promise<HandlerName[] | undefined> {
  const worker = new Worker(INTROSPECT, {
    eval: true,
    workerData: { url: `${pathToFileURL(file).href}?introspect=${Date.now()}`, names: HANDLERS },
    resourceLimits: { maxOldGenerationSizeMb: 128 },
    stdout: true,
    stderr: true,
  });
  try {
    return await new Promise<HandlerName[] | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      worker.once('message', (m: { handlers: HandlerName[] | null }) => {
        clearTimeout(timer);
        resolve(m.handlers ?? undefined);
      });
      worker.once('error', () => {
        clearTimeout(timer);
        resolve(undefined);
      });
      worker.once('exit', () => {
        clearTimeout(timer);
        resolve(undefined);
      });
    });
  } finally {
    await worker.terminate();
  }
}

/**
 * Worker code from `--workers-dir` (host-profile §2): `DIR/<space>/<name>.mjs` or `.js`, with an
 * optional `DIR/<space>/<name>.json`. The deployment uid is a digest of those files, so it
 * changes exactly when the code or its configuration does.
 */
export class LocalWorkerRegistry implements WorkerRegistry {
  private readonly dir: string;
  private readonly cache = new Map<string, HandlerName[] | undefined>();

  constructor(dir: string) {
    this.dir = dir;
  }

  /** The module file of (space, name), if there is one. */
  async moduleFile(space: string, name: string): Promise<{ file: string; source: Buffer } | undefined> {
    if (!ID_PATTERN.test(space) || !ID_PATTERN.test(name) || name.startsWith('.')) return undefined;
    for (const ext of ['.mjs', '.js']) {
      const file = path.join(this.dir, space, `${name}${ext}`);
      try {
        return { file, source: await readFile(file) };
      } catch {
        // try the next extension
      }
    }
    return undefined;
  }

  /** `DIR/<space>/<name>.json`: `{"vars":{…},"queueProducers":{"BINDING":{"queue":"<name>"}}}`, or {}. */
  async config(space: string, name: string): Promise<WorkerConfig> {
    if (!ID_PATTERN.test(space) || !ID_PATTERN.test(name)) return {};
    let raw: Buffer;
    try {
      raw = await readFile(path.join(this.dir, space, `${name}.json`));
    } catch {
      return {};
    }
    const parsed = JSON.parse(raw.toString('utf8')) as WorkerConfig;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new Error(`${space}/${name}.json must hold a JSON object`);
    }
    return parsed;
  }

  describeMissing(space: string, name: string): string {
    const base = path.join(this.dir, space, name);
    return `no module ${base}.mjs (or .js) that loads and exports a plain object`;
  }

  async lookup(space: string, name: string): Promise<WorkerCode | undefined> {
    const found = await this.moduleFile(space, name);
    if (!found) return undefined;
    const config = await readFile(path.join(this.dir, space, `${name}.json`)).catch(() => Buffer.alloc(0));
    const digest = createHash('sha256').update(found.source).update('\0').update(config).digest('hex');
    if (!this.cache.has(digest)) this.cache.set(digest, await declaredHandlers(found.file, 10_000));
    const handlers = this.cache.get(digest);
    if (!handlers) return undefined;
    return { deploymentUid: `local-${digest.slice(0, 24)}`, handlers };
  }
}
