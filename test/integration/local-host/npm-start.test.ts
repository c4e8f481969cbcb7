/**
 * The `npm start` contract (host-profile §2) against the real Host process: the ready line,
 * discovery over HTTP (HA-01), loopback-only listeners, clean stops on SIGINT/SIGTERM, recovery
 * after kill -9, the data-folder lock, and refusal of bad options.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  API_ROOT_PATH,
  descendantPids,
  descendantSnapshot,
  type HostProcess,
  hostClient,
  isLoopbackOnly,
  type JsonBody,
  MODULE_WORKER_FORM,
  READY_PREFIX,
  tcpListeners,
  useHostProcesses,
  waitGone,
  writeWorker,
} from '../../support/local-host-process.ts';

const hosts = useHostProcesses();

async function discovery(host: HostProcess) {
  const res = await fetch(`${host.loopback}/.well-known/takoform/v2`, {
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, type: res.headers.get('content-type'), body: (await res.json()) as JsonBody };
}

describe('npm start with the default origin', () => {
  let host: HostProcess;
  beforeAll(async () => {
    host = await hosts.start();
  });

  it('HA-01 prints the ready line within 60 s and serves discovery over real HTTP', async () => {
    expect(host.readyMs).toBeLessThan(60_000);
    console.info(`Host ready ${host.readyMs} ms after spawn`);
    const origin = `http://127.0.0.1:${host.port}`;
    expect(host.ready).toEqual({
      origin,
      baseUrl: `${origin}${API_ROOT_PATH}`,
      dataDir: host.dataDir,
      apiKey: expect.stringMatching(/^[\x21-\x7e]{32,}$/),
    });
    expect(
      host
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith(READY_PREFIX)),
    ).toHaveLength(1);

    const d = await discovery(host);
    expect(d.status).toBe(200);
    expect(d.type?.split(';')[0]).toBe('application/json');
    expect(d.body).toMatchObject({
      api: 'forms.takoform.com/v2',
      baseUrl: `${origin}${API_ROOT_PATH}`,
      authentication: { schemes: ['Bearer'] },
      capabilities: { offerings: false, previews: false, privateInputs: false },
      limits: { maxRequestBytes: 1_048_576, maxPageSize: 100, replayWindowSeconds: 86_400 },
    });
  });

  it('HA-01 the documentation URLs of discovery answer 200 over real HTTP, and so do / and /health', async () => {
    const d = await discovery(host);
    const get = (url: string) => fetch(url, { signal: AbortSignal.timeout(10_000) });
    for (const url of [d.body.documentation, d.body.authentication.documentation]) {
      const res = await get(url.replace(d.body.baseUrl.replace(API_ROOT_PATH, ''), host.loopback));
      expect(res.status, url).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(await res.text()).toContain('<pre>');
    }
    const home = await get(`${host.loopback}/`);
    expect(home.status).toBe(200);
    expect(await home.text()).toContain('href="console"');
    const health = await get(`${host.loopback}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
  });

  it('binds every listener of the Host and its stand-ins to 127.0.0.1 only', () => {
    const standIns = descendantPids(host.pid);
    expect(standIns.length).toBeGreaterThanOrEqual(2); // DynamoDB Local and the SQS server
    const listeners = tcpListeners([host.pid, ...standIns]);
    // Not vacuous: the Host's API port and a listener in each stand-in are found.
    expect(listeners).toContainEqual(expect.objectContaining({ pid: host.pid, port: host.port }));
    for (const pid of standIns) expect(listeners.some((l) => l.pid === pid)).toBe(true);
    expect(listeners.filter((l) => !isLoopbackOnly(l))).toEqual([]);
  });

  it('SIGINT stops the Host with exit code 0 and leaves no descendant process', async () => {
    const before = descendantSnapshot(host.pid);
    expect(before.size).toBeGreaterThanOrEqual(2);
    expect(await host.stop('SIGINT', 20_000)).toEqual({ code: 0, signal: null });
    // Checked at the moment the Host has exited: it must have waited for its stand-ins.
    expect(await waitGone(before, 0)).toEqual([]);
    expect(existsSync(path.join(host.dataDir, 'host.pid'))).toBe(false);
  });
});

describe('npm start with --public-origin', () => {
  const publicOrigin = 'https://host.example.test';
  let host: HostProcess;
  beforeAll(async () => {
    host = await hosts.start({ args: ['--public-origin', publicOrigin] });
  });

  it('HA-01 advertises the public origin in the ready line and discovery', async () => {
    expect(host.ready.origin).toBe(publicOrigin);
    expect(host.ready.baseUrl).toBe(`${publicOrigin}${API_ROOT_PATH}`);
    const d = await discovery(host);
    expect(d.status).toBe(200);
    expect(d.type?.split(';')[0]).toBe('application/json');
    expect(d.body.baseUrl).toBe('https://host.example.test/apis/forms.takoform.com/v2');
    expect(d.body.documentation.startsWith(`${publicOrigin}/`)).toBe(true);
    expect(d.body.authentication.documentation.startsWith(`${publicOrigin}/`)).toBe(true);
  });

  it('SIGTERM stops the Host with exit code 0 and leaves no descendant process', async () => {
    const before = descendantSnapshot(host.pid);
    expect(before.size).toBeGreaterThanOrEqual(2);
    expect(await host.stop('SIGTERM', 20_000)).toEqual({ code: 0, signal: null });
    expect(await waitGone(before, 0)).toEqual([]);
  });
});

describe('npm start after kill -9', () => {
  it('stand-ins exit by themselves, and a restart on the same data dir keeps the Resource', async () => {
    const workersDir = hosts.tempDir();
    const name = `survivor-${Date.now().toString(36)}`;
    writeWorker(workersDir, 'default', name);
    const first = await hosts.start({ workersDir });
    const key = `kill9-${randomUUID()}`;
    const body = { form: MODULE_WORKER_FORM, space: 'default', name, spec: {} };
    const created = await hostClient(first).request('POST', '/resources', {
      body,
      headers: { 'idempotency-key': key },
    });
    expect(created.status).toBe(202);
    const uid: string = created.body.resourceUid;
    expect((await hostClient(first).waitTerminal(created.body.id)).body.status).toBe('succeeded');

    const standIns = descendantSnapshot(first.pid);
    expect(standIns.size).toBeGreaterThanOrEqual(2);
    expect(await first.kill9()).toEqual({ code: null, signal: 'SIGKILL' });
    // Nobody signals the stand-ins: they see their stdin close and exit on their own.
    const killedAt = Date.now();
    expect(await waitGone(standIns, 20_000)).toEqual([]);
    console.info(`stand-ins exited ${Date.now() - killedAt} ms after kill -9 of the Host`);

    const second = await hosts.start({ dataDir: first.dataDir, workersDir });
    expect(second.ready.apiKey).toBe(first.ready.apiKey);
    const api = hostClient(second);
    expect((await api.listByName('default', name)).map((r) => r.uid)).toEqual([uid]);
    const resource = await api.request('GET', `/resources/${uid}`);
    expect(resource.status).toBe(200);
    expect(resource.body).toMatchObject({
      generation: 1,
      phase: 'idle',
      lastOperation: created.body.id,
      observed: { ready: true },
    });
    const replay = await api.request('POST', '/resources', { body, headers: { 'idempotency-key': key } });
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ id: created.body.id, status: 'succeeded' });

    expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});

describe('npm start refusals', () => {
  it('refuses a second Host on the same data dir while the first runs', async () => {
    const first = await hosts.start();
    const second = await hosts.runToExit(['--port', '0'], { dataDir: first.dataDir });
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(
      `another Host (pid ${first.pid}) is using the data folder ${first.dataDir}`,
    );
    expect(second.stdout).not.toContain(READY_PREFIX);
    // The first Host keeps its lock and keeps serving.
    expect(readFileSync(path.join(first.dataDir, 'host.pid'), 'utf8')).toBe(String(first.pid));
    expect((await discovery(first)).status).toBe(200);
    expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });

  it.each<[string, string[], Record<string, string>, RegExp]>([
    ['--port abc', ['--port', 'abc'], {}, /--port must be an integer in 0\.\.65535, got "abc"/],
    ['TAKOFORM_PORT=abc', [], { TAKOFORM_PORT: 'abc' }, /--port must be an integer/],
    [
      '--public-origin ftp://x',
      ['--port', '0', '--public-origin', 'ftp://x'],
      {},
      /--public-origin: .*https/,
    ],
    ['an unknown option', ['--port', '0', '--bogus'], {}, /--bogus/],
  ])('exits non-zero with a message and the usage for %s', async (_, args, env, message) => {
    const run = await hosts.runToExit(args, { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).toContain('Usage: npm start -- [options]');
    expect(run.stdout).not.toContain(READY_PREFIX);
  });

  it('exits non-zero with a message for a bad TAKOFORM_OPERATION_LEASE_MS', async () => {
    const run = await hosts.runToExit(['--port', '0'], { env: { TAKOFORM_OPERATION_LEASE_MS: '5' } });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('TAKOFORM_OPERATION_LEASE_MS must be an integer in 1000..600000, got "5"');
  });

  it('exits non-zero with a message for an unreadable --principals file', async () => {
    const run = await hosts.runToExit(['--port', '0', '--principals', '/nonexistent/principals.json']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('--principals /nonexistent/principals.json: not readable');
    expect(run.stdout).not.toContain(READY_PREFIX);
  });
});
