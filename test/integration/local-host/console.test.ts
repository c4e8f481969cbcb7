/**
 * The console (issue 14, part 3) in a real browser: Debian's chromium, headless, driven by
 * playwright-core, against a real local Host (`npm start` as a child process). The test signs in
 * through the page, compares every figure the page shows with what the API answers, checks that
 * no request left 127.0.0.1, that each response carried the CSP and each API call the Bearer key,
 * that the key stays in this tab's sessionStorage only, and saves a screenshot
 * (test-results/console.png; docs/console.png is a copy of one).
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP } from '../../../lambdas/console/console-routes.ts';
import { FORM_URLS } from '../../../lambdas/forms/form-urls.ts';
import { waitFor } from '../../support/delivery-harness.ts';
import {
  type HostProcess,
  hostClient,
  type JsonBody,
  useHostProcesses,
  writeWorker,
} from '../../support/local-host-process.ts';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = path.join(REPO, 'test-results/console.png');
/** The flags of the environment notes: nothing that phones home, no GPU, a fresh profile. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const FAILING_WORKER = "export default { async queue() { throw new Error('always fails'); } };\n";

const hosts = useHostProcesses();

describe('the console in headless chromium against npm start', () => {
  let host: HostProcess;
  let api: ReturnType<typeof hostClient>;
  let context: BrowserContext;
  let page: Page;
  const uid: Record<string, string> = {};
  const requests: { url: string; authorization: string | undefined }[] = [];
  const blocked: string[] = [];
  const responses: { url: string; status: number; csp: string | undefined }[] = [];
  /** Script errors and console errors (a CSP violation is reported as one). */
  const pageErrors: string[] = [];
  let deadLetterOriginal = '';

  const ext = async (method: string, p: string, body?: unknown): Promise<JsonBody> => {
    const res = await fetch(`${host.loopback}/ext/queues/v1${p}`, {
      method,
      headers: {
        authorization: `Bearer ${host.ready.apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    expect(res.status, `${method} ${p}`).toBe(200);
    return res.json();
  };

  async function create(name: string, form: string, spec: unknown): Promise<string> {
    const r = await api.request('POST', '/resources', {
      body: { form, space: 'default', name, spec },
      headers: { 'idempotency-key': `console-test-${name}-${host.pid}` },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const done = await api.waitTerminal(r.body.id);
    expect(done.body.status, JSON.stringify(done.body)).toBe('succeeded');
    return r.body.resourceUid;
  }

  const send = async (queue: string, texts: string[]): Promise<string[]> =>
    (
      await ext('POST', `/queues/${queue}/messages`, {
        messages: texts.map((t) => ({ body: Buffer.from(t).toString('base64') })),
      })
    ).messageIds;

  /** Every row of a table as `{field: text}`, keyed by the row's data attribute. */
  const rows = (table: string, key: string) =>
    page.$$eval(
      `#${table} tbody tr[${key}]`,
      (trs, k) =>
        trs.map((tr) => ({
          key: tr.getAttribute(k) ?? '',
          cells: Object.fromEntries(
            [...tr.querySelectorAll('td[data-field]')].map((td) => [
              td.getAttribute('data-field'),
              td.textContent,
            ]),
          ),
        })),
      key,
    );

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)`);
    }
    host = await hosts.start({ env: { TAKOFORM_HISTORY_SECONDS: '1' } });
    api = hostClient(host);
    // Returns without settling, so every message is acknowledged.
    writeWorker(host.workersDir, 'default', 'echo');
    writeWorker(host.workersDir, 'default', 'failing', FAILING_WORKER);
    for (const q of ['orders', 'orders-dlq', 'jobs', 'jobs-dlq']) {
      uid[q] = await create(q, FORM_URLS.atLeastOnceQueue, { messageRetentionSeconds: 3600 });
    }
    uid.echo = await create('echo', FORM_URLS.moduleWorker, {});
    uid.failing = await create('failing', FORM_URLS.moduleWorker, {});
    const consumer = (queue: string, worker: string, dlq: string, maxRetries: number) => ({
      queue: { resourceUid: uid[queue] },
      worker: { resourceUid: uid[worker] },
      deadLetterQueue: { resourceUid: uid[dlq] },
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 0,
      maxConcurrency: 2,
      maxRetries,
      retryDelaySeconds: 0,
    });
    uid['orders-echo'] = await create(
      'orders-echo',
      FORM_URLS.queueConsumer,
      consumer('orders', 'echo', 'orders-dlq', 3),
    );
    uid['jobs-failing'] = await create(
      'jobs-failing',
      FORM_URLS.queueConsumer,
      consumer('jobs', 'failing', 'jobs-dlq', 0),
    );

    await send(uid.orders as string, ['one', 'two', 'three']);
    [deadLetterOriginal = ''] = await send(uid.jobs as string, ['boom']);
    // Settled: the three orders acknowledged (and sampled), the failing job in its dead-letter queue.
    await waitFor('delivery and the dead-letter move', async () => {
      const [orders, dlq, history] = await Promise.all([
        ext('GET', `/queues/${uid.orders}/stats`),
        ext('GET', `/queues/${uid['jobs-dlq']}/stats`),
        ext('GET', `/queues/${uid.orders}/history`),
      ]);
      const acked = history.samples.reduce((n: number, s: JsonBody) => n + s.acknowledged, 0);
      return orders.visible + orders.inFlight === 0 && dlq.visible === 1 && acked === 3 ? true : undefined;
    });

    context = await chromium.launchPersistentContext(hosts.tempDir('takoform-chromium-'), {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 900 },
    });
    // Anything not addressed to the Host is refused and recorded: the page must make no such request.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${host.loopback}/`) || url.startsWith('data:')) return route.continue();
      blocked.push(url);
      return route.abort();
    });
    context.on('request', (r) => requests.push({ url: r.url(), authorization: r.headers().authorization }));
    context.on('response', (r) =>
      responses.push({ url: r.url(), status: r.status(), csp: r.headers()['content-security-policy'] }),
    );
    context.on('weberror', (e) => pageErrors.push(String(e.error())));
    context.on('console', (m) => {
      if (m.type() === 'error') pageErrors.push(m.text());
    });
    page = await context.newPage();
  });

  afterAll(async () => {
    await context?.close();
  });

  it('refuses a wrong key on the sign-in form and keeps nothing', async () => {
    const r = await page.goto(`${host.loopback}/console`);
    expect(r?.status()).toBe(200);
    expect(r?.headers()['content-security-policy']).toBe(CONSOLE_CSP);
    await page.fill('#api-key', 'not-the-key');
    await page.click('#sign-in-form button[type=submit]');
    await expect.poll(() => page.textContent('#sign-in-error')).toBe('The Host refused this key.');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await page.isVisible('#dashboard')).toBe(false);
  });

  it('OPS-04 SEC-01 signs in; queues, consumers, dead letters and Operations match the API; the key stays in the tab', async () => {
    // The Host is idle before the figures are compared: each consumer's last lane has ended its
    // final long poll (the idle wait) and freed its slot.
    await expect
      .poll(
        async () => {
          const held = await Promise.all(
            ['orders-echo', 'jobs-failing'].map(
              async (c) => (await ext('GET', `/consumers/${uid[c]}/state`)).slotsHeld,
            ),
          );
          return held.every((n) => n === 0);
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBe(true);
    const key = host.ready.apiKey as string;
    await page.fill('#api-key', key);
    await page.click('#sign-in-form button[type=submit]');
    await page.waitForSelector('#dead-letters tbody tr[data-message]');
    await page.waitForSelector('#queues tbody tr[data-uid]');

    // The key: this tab's sessionStorage only; no cookie, no localStorage, not in another tab.
    expect(await page.evaluate(() => sessionStorage.getItem('takoform.console.key'))).toBe(key);
    expect(await page.evaluate('[localStorage.length, document.cookie]')).toEqual([0, '']);
    const other = await context.newPage();
    await other.goto(`${host.loopback}/console`);
    expect(await other.evaluate(() => sessionStorage.getItem('takoform.console.key'))).toBeNull();
    expect(await other.isVisible('#sign-in')).toBe(true);
    await other.close();
    expect(await page.textContent('#who')).toBe('signed in as dev');

    // Queues: every figure as the stats endpoint gives it now (the Host is idle, so they hold).
    const queues = await rows('queues', 'data-uid');
    expect(queues.map((q) => q.cells.name).sort()).toEqual(['jobs', 'jobs-dlq', 'orders', 'orders-dlq']);
    for (const q of queues) {
      const s = await ext('GET', `/queues/${q.key}/stats`);
      expect(q.cells, q.cells.name).toMatchObject({
        visible: String(s.visible),
        inFlight: String(s.inFlight),
        delayed: String(s.delayed),
        consumer: s.consumerUid ? (q.cells.name === 'orders' ? 'orders-echo' : 'jobs-failing') : '–',
      });
    }
    expect(queues.find((q) => q.cells.name === 'jobs-dlq')?.cells.visible).toBe('1');

    // Consumers: running ÷ maxConcurrency, slots and settings from the state endpoint.
    const consumers = await rows('consumers', 'data-uid');
    expect(consumers.map((c) => c.cells.name).sort()).toEqual(['jobs-failing', 'orders-echo']);
    for (const c of consumers) {
      const s = await ext('GET', `/consumers/${c.key}/state`);
      expect(c.cells).toMatchObject({
        state: s.state,
        running: `${s.runningBatches} ÷ ${s.maxConcurrency}`,
        slotsHeld: String(s.slotsHeld),
        settings: `batch ≤ ${s.settings.maxBatchSize} / ${s.settings.maxBatchTimeoutSeconds} s, retries ${s.settings.maxRetries} after ${s.settings.retryDelaySeconds} s`,
      });
    }
    expect(consumers.find((c) => c.cells.name === 'jobs-failing')?.cells).toMatchObject({
      queue: 'jobs',
      worker: 'failing',
      deadLetterQueue: 'jobs-dlq',
    });

    // Dead letters: the Host's record of the move, as the peek endpoint answers it.
    const dead = await rows('dead-letters', 'data-message');
    expect(dead).toHaveLength(1);
    const [peeked] = (await ext('POST', `/queues/${uid['jobs-dlq']}/peek`, { limit: 10 })).messages;
    expect(peeked.deadLetter).toMatchObject({ sourceQueueName: 'jobs', originalId: deadLetterOriginal });
    expect(dead[0]).toMatchObject({
      key: peeked.id,
      cells: {
        queue: 'jobs-dlq',
        preview: 'boom',
        sourceQueue: 'jobs',
        originalId: deadLetterOriginal,
        attempts: String(peeked.deadLetter.attempts),
        lastOutcome: peeked.deadLetter.lastOutcome,
      },
    });

    // Operations: each Resource's last Operation, as the Host API answers it.
    const ops = await rows('operations', 'data-uid');
    expect(ops).toHaveLength(Object.keys(uid).length);
    for (const o of ops) {
      const r = await api.request('GET', `/resources/${o.key}`);
      const op = await api.request('GET', `/operations/${r.body.lastOperation}`);
      expect(o.cells).toMatchObject({
        phase: r.body.phase,
        operation: r.body.lastOperation,
        action: op.body.action,
        status: op.body.status,
      });
    }
  });

  it('OPS-04 charts the last hour from the Host’s samples: the acknowledged orders and the backlog', async () => {
    await page.selectOption('#chart-queue', uid.orders as string);
    await expect
      .poll(() => page.textContent('#chart-note'), { timeout: 15_000 })
      .toMatch(/; 3 messages acknowledged in that time\.$/);
    const history = await ext('GET', `/queues/${uid.orders}/history`);
    expect(history.available).toBe(true);
    expect(history.samples.reduce((n: number, s: JsonBody) => n + s.acknowledged, 0)).toBe(3);
    const drawn = await page.$eval('#chart svg', (svg) => ({
      samples: Number(svg.getAttribute('data-samples')),
      bars: svg.querySelectorAll('rect.acked').length,
      line: svg.querySelectorAll('polyline.backlog').length,
    }));
    expect(drawn.samples).toBeGreaterThan(0);
    expect(drawn.bars).toBeGreaterThan(0);
    expect(drawn.line).toBe(1);

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(existsSync(SCREENSHOT)).toBe(true);
  });

  it('made no request beyond 127.0.0.1; every answer carried the CSP, every API call the key', async () => {
    expect(blocked).toEqual([]);
    expect(requests.length).toBeGreaterThan(10);
    for (const r of requests.filter((x) => !x.url.startsWith('data:'))) {
      expect(r.url.startsWith(`${host.loopback}/`), r.url).toBe(true);
    }
    const apiCalls = requests.filter((r) => /\/(apis|ext)\//.test(new URL(r.url).pathname));
    expect(apiCalls.length).toBeGreaterThan(5);
    // The one call without the real key is the refused sign-in.
    const key = `Bearer ${host.ready.apiKey}`;
    expect(apiCalls.filter((r) => r.authorization !== key).map((r) => r.authorization)).toEqual([
      'Bearer not-the-key',
    ]);
    const pages = responses.filter((r) => new URL(r.url).pathname.startsWith('/console'));
    expect(pages.map((r) => new URL(r.url).pathname)).toEqual(
      expect.arrayContaining(['/console', '/console/app.js', '/console/console.css']),
    );
    for (const r of pages) expect(r.csp, r.url).toBe(CONSOLE_CSP);
    // No CSP violation and no script error; the refused sign-in's 401 is the one logged failure.
    expect(pageErrors.filter((e) => !/status of 401/.test(e))).toEqual([]);
  });

  it('signing out forgets the key', async () => {
    await page.click('#sign-out');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await page.isVisible('#sign-in')).toBe(true);
  });
});
