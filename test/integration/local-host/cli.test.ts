/**
 * The `takoform` command line (host-profile §6) as a user runs it: `bin/takoform` as a child
 * process, from a folder outside the clone, against a real local Host that it finds through the
 * data folder. apply twice, send and delivery to the example worker, status against the queue's
 * real content, dead letters peeked and redriven, purge, and the exit codes 0/1/2.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { type HostProcess, type JsonBody, useHostProcesses } from '../../support/local-host-process.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const LAUNCHER = path.join(REPO, 'bin/takoform');

/** Throws on every batch: with maxRetries 0 its messages go to the dead-letter queue at once. */
const FAILING_WORKER = `export default {
  async queue() {
    throw new Error('this worker always fails');
  },
};
`;

/**
 * The poison-message pattern of docs/worker-api.md: each message settled on its own, only the
 * failing one retried, so it alone runs out of retries; its batch-mates are acknowledged.
 */
const CAREFUL_WORKER = `export default {
  async queue(batch) {
    for (const message of batch.messages) {
      const text = new TextDecoder().decode(message.body);
      if (text === 'poison') {
        await batch.retry(message.id);
        continue;
      }
      console.log(JSON.stringify({ careful: text }));
      await batch.acknowledge(message.id);
    }
  },
};
`;

/** A consumer with a dead-letter queue, written as YAML with references by name. */
const FAILING_YAML = `space: default
resources:
  - kind: consumer
    name: jobs-failing
    spec:
      queue: { name: jobs }
      worker: { name: failing }
      deadLetterQueue: { name: jobs-dlq }
      maxBatchSize: 1
      maxBatchTimeoutSeconds: 0
      maxConcurrency: 1
      maxRetries: 0
      retryDelaySeconds: 0
  - kind: worker
    name: failing
    spec: {}
  - kind: queue
    name: jobs
    spec: { messageRetentionSeconds: 3600 }
  - kind: queue
    name: jobs-dlq
    spec: { messageRetentionSeconds: 3600 }
`;

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const hosts = useHostProcesses();

describe('takoform CLI against npm start', () => {
  let host: HostProcess;
  let cwd: string;

  /** `npx takoform …` as the launcher runs it; the folder the user is in is `cwd`. */
  function cli(
    args: string[],
    o: { env?: Record<string, string>; input?: string; dataDir?: boolean } = {},
  ): Promise<CliRun> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('TAKOFORM_')) env[k] = v;
    const where = o.dataDir === false ? [] : ['--data-dir', host.dataDir];
    const child = spawn('bash', [LAUNCHER, ...where, ...args], {
      cwd,
      env: { ...env, ...o.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.stdin.end(o.input ?? '');
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`takoform ${args.join(' ')} did not finish; stderr: ${stderr}`));
      }, 60_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  async function ok(args: string[], input?: string): Promise<string> {
    const r = await cli(args, input === undefined ? {} : { input });
    expect(r.code, `takoform ${args.join(' ')}\n${r.stderr}`).toBe(0);
    return r.stdout;
  }

  const json = async (args: string[]): Promise<JsonBody> => JSON.parse(await ok([...args, '--json']));

  async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await sleep(250);
    }
  }

  /** Lines the example worker printed (on the Host's stderr, under its prefix), parsed. */
  const echoed = () =>
    host
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('[worker default/echo] '))
      .map((l) => JSON.parse(l.slice('[worker default/echo] '.length)));

  beforeAll(async () => {
    host = await hosts.start();
    mkdirSync(path.join(host.workersDir, 'default'), { recursive: true });
    copyFileSync(
      path.join(REPO, 'examples/workers/default/echo.mjs'),
      path.join(host.workersDir, 'default/echo.mjs'),
    );
    writeFileSync(path.join(host.workersDir, 'default/failing.mjs'), FAILING_WORKER);
    writeFileSync(path.join(host.workersDir, 'default/careful.mjs'), CAREFUL_WORKER);
    cwd = hosts.tempDir('takoform-cli-');
    copyFileSync(path.join(REPO, 'examples/quickstart.json'), path.join(cwd, 'quickstart.json'));
    writeFileSync(path.join(cwd, 'failing.yaml'), FAILING_YAML);
  });

  it('apply creates the quick start in dependency order; a second run changes nothing and says so', async () => {
    expect(await ok(['apply', '-f', 'quickstart.json'])).toBe(
      [
        'queue/orders created',
        'queue/orders-dlq created',
        'worker/echo created',
        'consumer/orders-echo created',
        '',
      ].join('\n'),
    );
    const again = await json(['apply', '-f', 'quickstart.json']);
    expect(again.results.map((r: JsonBody) => r.result)).toEqual([
      'unchanged',
      'unchanged',
      'unchanged',
      'unchanged',
    ]);
    // References by name became uids.
    const consumer = await json(['get', 'consumer', 'orders-echo']);
    const queue = await json(['get', 'queue', 'orders']);
    expect(consumer.spec.queue).toEqual({ resourceUid: queue.uid });
    expect(consumer.phase).toBe('idle');
    // A changed spec is an update (PUT with the current generation); the rest stays.
    const file = JSON.parse(readFileSync(path.join(cwd, 'quickstart.json'), 'utf8'));
    file.resources[0].spec.messageRetentionSeconds = 7200;
    writeFileSync(path.join(cwd, 'changed.json'), JSON.stringify(file));
    expect(await ok(['apply', '-f', 'changed.json'])).toBe(
      'queue/orders updated\nqueue/orders-dlq unchanged\nworker/echo unchanged\nconsumer/orders-echo unchanged\n',
    );
    expect(await json(['get', 'queue', 'orders'])).toMatchObject({
      generation: 2,
      spec: { messageRetentionSeconds: 7200 },
    });
  });

  it('send delivers to the example worker; status figures match the queue', async () => {
    const id = (await ok(['send', 'orders', 'hello'])).trim();
    expect(id).toMatch(/^m[0-9A-Z]+$/);
    const line = await until('delivery', async () => echoed().find((l) => l.id === id));
    expect(line).toMatchObject({ queue: 'orders', text: 'hello', attempts: 1 });

    // Three messages on a queue no consumer reads: status shows exactly them.
    await ok(['send', 'orders-dlq', 'a']);
    await ok(['send', 'orders-dlq', '--file', '-'], 'from stdin');
    await ok(['send', 'orders-dlq', 'later', '--delay', '600']);
    const s = await json(['status']);
    const byName = new Map<string, JsonBody>(s.queues.map((q: JsonBody) => [q.name, q]));
    expect(byName.get('orders-dlq')).toMatchObject({ visible: 2, inFlight: 0, delayed: 1, consumer: null });
    expect(byName.get('orders-dlq').oldestAgeSeconds).toBeGreaterThanOrEqual(0);
    expect(byName.get('orders')).toMatchObject({
      visible: 0,
      consumer: {
        name: 'orders-echo',
        state: 'active',
        maxConcurrency: 2,
        deadLetterQueue: { name: 'orders-dlq', depth: 3 },
      },
    });
    const human = await ok(['status', 'orders']);
    expect(human).toContain('queue orders: visible 0, in flight 0, delayed 0');
    expect(human).toContain('dead letters: orders-dlq, 3 messages');
    // Slots without a running batch are told as lanes receiving, not as held slots.
    expect(human).toMatch(/consumer \S+: active, running \d+\/\d+ batches, \d+ lanes? receiving, batch ≤/);
    expect(await ok(['purge', 'orders-dlq', '--yes'])).toBe('purged orders-dlq\n');
    expect(await json(['status', 'orders-dlq'])).toMatchObject({
      queues: [{ visible: 0, inFlight: 0, delayed: 0 }],
    });
  });

  it('a failing message is dead-lettered; dlq peek shows it, dlq redrive moves it back and it is delivered', async () => {
    const created = await ok(['apply', '-f', 'failing.yaml']);
    expect(created.trim().split('\n')).toEqual([
      'queue/jobs created',
      'queue/jobs-dlq created',
      'worker/failing created',
      'consumer/jobs-failing created',
    ]);
    const id = (await ok(['send', 'jobs', 'boom'])).trim();
    await until('the dead-letter move', async () => {
      const s = await json(['status', 'jobs-dlq']);
      return s.queues[0].visible === 1 ? true : undefined;
    });
    const peeked = await json(['dlq', 'peek', 'jobs-dlq']);
    expect(peeked.messages).toHaveLength(1);
    expect(peeked.messages[0]).toMatchObject({ preview: 'boom', sizeBytes: 4, committed: true });
    expect(peeked.messages[0].id).not.toBe(id); // a dead-letter copy is a new message
    // The Host's own record of the move: where the copy came from and why.
    expect(peeked.messages[0].deadLetter).toMatchObject({
      sourceQueueName: 'jobs',
      originalId: id,
      attempts: 1,
      lastOutcome: 'threw',
    });
    const human = await ok(['dlq', 'peek', 'jobs-dlq']);
    expect(human).toContain(`${peeked.messages[0].id}  `);
    expect(human).toContain(`4 B  "boom"  from jobs (id ${id}), 1 attempts, last threw`);
    // Peeking consumed nothing.
    expect((await json(['status', 'jobs-dlq'])).queues[0]).toMatchObject({ visible: 1, inFlight: 0 });
    expect((await json(['status', 'jobs'])).queues[0].consumer.deadLetterQueue).toEqual({
      name: 'jobs-dlq',
      queueUid: expect.any(String),
      depth: 1,
    });

    // Refused while the source queue has a consumer: exit 1, the Problem on stderr.
    const refused = await cli(['dlq', 'redrive', 'jobs', '--to', 'orders']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^takoform: dependency_conflict: queue jobs has a consumer/m);

    const moved = await json(['dlq', 'redrive', 'jobs-dlq', '--to', 'orders']);
    expect(moved).toMatchObject({ from: 'jobs-dlq', to: 'orders', moved: 1, skipped: 0 });
    const line = await until('redriven delivery', async () =>
      echoed().find((l) => l.id === moved.messageIds[0]),
    );
    expect(line).toMatchObject({ queue: 'orders', text: 'boom', attempts: 1 });
    expect((await json(['status', 'jobs-dlq'])).queues[0]).toMatchObject({ visible: 0, inFlight: 0 });
  });

  it('dead letters by id: peek filters by source queue and outcome; redrive and purge touch only the chosen ones', async () => {
    const sent = [
      (await ok(['send', 'jobs', 'first'])).trim(),
      (await ok(['send', 'jobs', 'second'])).trim(),
    ];
    const dead = await until('both dead-letter moves', async () => {
      const p = await json(['dlq', 'peek', 'jobs-dlq', '--from', 'jobs', '--outcome', 'threw']);
      return p.messages.length === 2 ? p.messages : undefined;
    });
    expect(dead.map((m: JsonBody) => m.deadLetter.originalId).sort()).toEqual([...sent].sort());
    expect((await json(['dlq', 'peek', 'jobs-dlq', '--outcome', 'abandoned'])).messages).toEqual([]);
    expect((await json(['dlq', 'peek', 'jobs-dlq', '--from', 'orders'])).messages).toEqual([]);
    const [keep, drop] = dead.map((m: JsonBody) => m.id as string);
    const moved = await json(['dlq', 'redrive', 'jobs-dlq', '--to', 'orders', '--id', keep]);
    expect(moved).toMatchObject({ moved: 1, notFound: [] });
    await until('the chosen message delivered', async () =>
      echoed().find((l) => l.id === moved.messageIds[0]),
    );
    expect(await ok(['purge', 'jobs-dlq', '--yes', '--id', drop])).toBe('deleted 1 messages of jobs-dlq\n');
    expect((await json(['status', 'jobs-dlq'])).queues[0]).toMatchObject({ visible: 0, inFlight: 0 });
    // An id that is not there fails the command after the rest was done.
    const missing = await cli(['purge', 'jobs-dlq', '--yes', '--id', 'm-not-there']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      'takoform: not_found: queue jobs-dlq has no visible message m-not-there',
    );
  });

  it('a poison message settled on its own is dead-lettered alone; its batch-mates are handled', async () => {
    writeFileSync(
      path.join(cwd, 'careful.yaml'),
      [
        'resources:',
        '  - { kind: queue, name: careful-in, spec: { messageRetentionSeconds: 3600 } }',
        '  - { kind: queue, name: careful-dlq, spec: { messageRetentionSeconds: 3600 } }',
        '  - { kind: worker, name: careful, spec: {} }',
        '  - kind: consumer',
        '    name: careful-in-careful',
        '    spec: { queue: { name: careful-in }, worker: { name: careful }, deadLetterQueue: { name: careful-dlq },',
        '            maxBatchSize: 10, maxBatchTimeoutSeconds: 2, maxConcurrency: 1, maxRetries: 1, retryDelaySeconds: 0 }',
        '',
      ].join('\n'),
    );
    await ok(['apply', '-f', 'careful.yaml']);
    for (const text of ['good-1', 'poison', 'good-2']) await ok(['send', 'careful-in', text]);
    const dead = await until('the poison message dead-lettered', async () => {
      const p = await json(['dlq', 'peek', 'careful-dlq']);
      return p.messages.length > 0 ? p.messages : undefined;
    });
    expect(dead.map((m: JsonBody) => [m.preview, m.deadLetter.attempts])).toEqual([['poison', 2]]);
    const handled = host
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('[worker default/careful] '))
      .map((l) => JSON.parse(l.slice('[worker default/careful] '.length)).careful);
    expect(handled.sort()).toEqual(['good-1', 'good-2']);
    expect((await json(['status', 'careful-in'])).queues[0]).toMatchObject({ visible: 0, inFlight: 0 });
    await ok(['delete', 'consumer', 'careful-in-careful']);
  });

  it('a worker without code is flagged by apply, and a consumer of it is refused naming the module file', async () => {
    writeFileSync(
      path.join(cwd, 'ghost.json'),
      JSON.stringify({
        resources: [
          { kind: 'queue', name: 'haunted', spec: { messageRetentionSeconds: 3600 } },
          { kind: 'worker', name: 'ghost', spec: {} },
          {
            kind: 'consumer',
            name: 'haunted-ghost',
            spec: {
              queue: { name: 'haunted' },
              worker: { name: 'ghost' },
              maxBatchSize: 1,
              maxBatchTimeoutSeconds: 0,
              maxConcurrency: 1,
              maxRetries: 0,
              retryDelaySeconds: 0,
            },
          },
        ],
      }),
    );
    const r = await cli(['apply', '-f', 'ghost.json']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('queue/haunted created\nworker/ghost created\n');
    expect(r.stderr).toContain('worker/ghost: not ready, the Host has no code for it that loads');
    expect(r.stderr).toContain(
      `takoform: dependency_conflict: the worker ghost has no code: no module ${path.join(host.workersDir, 'default', 'ghost')}.mjs (or .js)`,
    );
    expect(await ok(['delete', 'worker', 'ghost'])).toBe('worker/ghost deleted\n');
    expect(await ok(['delete', 'queue', 'haunted'])).toBe('queue/haunted deleted\n');
  });

  it('a named Host of the profile file; output piped into head ends quietly', async () => {
    const config = path.join(cwd, 'takoform-config');
    writeFileSync(
      config,
      [
        'hosts:',
        `  remote: { origin: "${host.loopback}", key: "${host.ready.apiKey}", space: default }`,
        `  here: { dataDir: "${host.dataDir}" }`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const env = { TAKOFORM_CONFIG: config };
    for (const args of [
      ['status', '--profile', 'remote'],
      ['status', '--profile', 'here'],
    ]) {
      const r = await cli([...args, '--json'], { env, dataDir: false });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).space).toBe('default');
    }
    const viaEnv = await cli(['get', 'queue', 'orders'], {
      env: { ...env, TAKOFORM_PROFILE: 'remote' },
      dataDir: false,
    });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    const unknown = await cli(['status', '--profile', 'prod'], { env, dataDir: false });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain(`takoform: no profile prod in ${config} (it has remote, here)`);

    // `head -n 0` closes the pipe before the first line: every write meets a closed reader.
    const piped = spawn(
      'bash',
      [
        '-c',
        `set -o pipefail; bash ${JSON.stringify(LAUNCHER)} --data-dir ${JSON.stringify(host.dataDir)} status | head -n 0`,
      ],
      { cwd, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    piped.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const code = await new Promise((resolve) => piped.once('exit', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });

  it('get lists by kind; delete waits; what is gone is refused (exit 1)', async () => {
    const list = await json(['get', 'consumer']);
    expect(list.items.map((r: JsonBody) => r.name).sort()).toEqual(['jobs-failing', 'orders-echo']);
    const rows = await ok(['get']);
    expect(rows).toMatch(/^queue\torders\tr[0-9A-Z]+\tidle\tgen 2$/m);
    expect(await ok(['delete', 'consumer', 'jobs-failing'])).toBe('consumer/jobs-failing deleted\n');
    const gone = await cli(['get', 'consumer', 'jobs-failing']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('takoform: not_found: no consumer jobs-failing in Space default');
    // A queue still referenced by a consumer cannot be deleted: the Host's Problem, exit 1.
    const busy = await cli(['delete', 'queue', 'orders']);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/^takoform: dependency_conflict: /m);
  });

  it('usage errors exit 2 before anything is sent; a wrong key is refused with exit 1', async () => {
    for (const args of [
      ['frobnicate'],
      ['send', 'orders'],
      ['send', 'orders', 'x', '--file', 'f'],
      ['send', 'orders', 'x', '--delay', '43201'],
      ['dlq', 'peek', 'orders', '--limit', '0'],
      ['purge', 'orders'],
      ['get', 'table', 'orders'],
      ['apply'],
      ['apply', '-f', 'missing.json'],
    ]) {
      const r = await cli(args);
      expect(r.code, `takoform ${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stdout).toBe('');
    }
    const wrongKey = await cli(['status'], {
      env: { TAKOFORM_ORIGIN: host.loopback, TAKOFORM_API_KEY: 'not-a-key-of-this-host-0123456789' },
    });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toContain('takoform: unauthenticated: ');
    // What to do about it: where this key came from, the two ways to give another, the local key's file.
    expect(wrongKey.stderr).toContain(
      'the key came from TAKOFORM_API_KEY; pass another with --key or TAKOFORM_API_KEY',
    );
    expect(wrongKey.stderr).toContain('.data/dev-api-key');
    const unreadable = await cli(['apply', '-f', 'missing.json']);
    expect(unreadable.stderr).toContain('takoform: cannot read missing.json: no such file');
    const noKey = await cli(['status', '--origin', host.loopback]);
    expect(noKey.code).toBe(2);
  });
});
