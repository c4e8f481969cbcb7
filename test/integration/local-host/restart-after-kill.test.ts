/**
 * RC-04 / issue 11 item 2: a supervisor that restarts the Host at once after `kill -9` must get
 * a running Host, not "another Host (pid N) is using the data folder". The killed Host's process
 * stays a zombie until its parent reaps it; under a parent (or PID 1) that never reaps, forever.
 *
 * The first case kills a Host started by the test helper and restarts without waiting for
 * anything. The second makes the zombie certain: the Host runs under a `sleep` that never waits
 * for children, so after `kill -9` its process stays a zombie for the whole restart.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  descendantPids,
  hostClient,
  MODULE_WORKER_FORM,
  procInfo,
  READY_PREFIX,
  type ReadyLine,
  useHostProcesses,
  writeWorker,
} from '../../support/local-host-process.ts';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../lambdas/local/main.ts');

/** Creates a ModuleWorker through the Host API and waits for it, so the restart has state to keep. */
async function createWorker(host: Parameters<typeof hostClient>[0], workersDir: string) {
  const name = `survivor-${randomUUID().slice(0, 8)}`;
  writeWorker(workersDir, 'default', name);
  const api = hostClient(host);
  const created = await api.request('POST', '/resources', {
    body: { form: MODULE_WORKER_FORM, space: 'default', name, spec: {} },
    headers: { 'idempotency-key': `rc04-${randomUUID()}` },
  });
  expect(created.status).toBe(202);
  expect((await api.waitTerminal(created.body.id)).body.status).toBe('succeeded');
  return { name, uid: created.body.resourceUid as string };
}

describe('RC-04 item 2: restart at once after kill -9', () => {
  const hosts = useHostProcesses({ cleanup: 'afterEach' });
  const parents: ChildProcess[] = [];
  afterEach(() => {
    // The non-reaping parents this file started; their zombie child goes to init with them.
    for (const p of parents.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  });

  it('RC-04 item 2: kill -9, then a restart on the same data folder with no wait becomes ready', async () => {
    const workersDir = hosts.tempDir();
    const first = await hosts.start({ workersDir });
    const { name, uid } = await createWorker(first, workersDir);

    const killedAt = Date.now();
    process.kill(first.pid, 'SIGKILL'); // not awaited: the restart begins at once
    const second = await hosts.start({ dataDir: first.dataDir, workersDir, readyTimeoutMs: 30_000 });
    console.info(`restart after kill -9: ready ${Date.now() - killedAt} ms after the kill`);
    expect(await first.waitExit(10_000)).toEqual({ code: null, signal: 'SIGKILL' });
    expect((await hostClient(second).listByName('default', name)).map((r) => r.uid)).toEqual([uid]);
    expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });

  it('RC-04 item 2: a killed Host that stays a zombie (its parent never reaps) does not block the restart', async () => {
    const scratch = hosts.tempDir();
    const dataDir = path.join(scratch, 'data');
    const workersDir = path.join(scratch, 'workers');
    mkdirSync(workersDir, { recursive: true });
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('TAKOFORM_')) env[k] = v;
    // sh starts the Host in the background and becomes `sleep`, which never waits for children.
    const parent = spawn(
      'sh',
      [
        '-c',
        '"$@" & exec sleep 120',
        'sh',
        process.execPath,
        MAIN,
        '--port',
        '0',
        '--data-dir',
        dataDir,
        '--workers-dir',
        workersDir,
      ],
      { cwd: scratch, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    parents.push(parent);
    let stderr = '';
    parent.stderr?.setEncoding('utf8').on('data', (c: string) => {
      stderr = (stderr + c).slice(-16_000);
    });
    const lines = createInterface({ input: parent.stdout! });
    const ready = await Promise.race([
      new Promise<ReadyLine>((resolve) =>
        lines.on('line', (l) => {
          if (l.startsWith(READY_PREFIX)) resolve(JSON.parse(l.slice(READY_PREFIX.length)));
        }),
      ),
      sleep(60_000).then(() => {
        throw new Error(`the first Host was not ready within 60 s; stderr:\n${stderr}`);
      }),
    ]);
    const hostPid = descendantPids(parent.pid as number).find(
      (pid) => procInfo(pid)?.ppid === parent.pid && procInfo(pid)?.comm !== 'sleep',
    );
    expect(hostPid, 'the Host process under the non-reaping parent').toBeDefined();
    const first = { loopback: ready.origin, ready };
    const { name, uid } = await createWorker(first, workersDir);

    const killedAt = Date.now();
    process.kill(hostPid as number, 'SIGKILL');
    for (let i = 0; i < 200 && procInfo(hostPid as number)?.state !== 'Z'; i++) await sleep(10);
    // The precondition of the case: the killed Host is a zombie and stays one during the restart.
    expect(procInfo(hostPid as number)?.state).toBe('Z');

    const second = await hosts.start({ dataDir, workersDir, readyTimeoutMs: 30_000 });
    console.info(`restart beside a zombie Host: ready ${Date.now() - killedAt} ms after the kill`);
    expect(procInfo(hostPid as number)?.state, 'still a zombie when the restart was ready').toBe('Z');
    expect((await hostClient(second).listByName('default', name)).map((r) => r.uid)).toEqual([uid]);
    expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});
