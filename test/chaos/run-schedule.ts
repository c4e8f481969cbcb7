/**
 * Runs one chaos schedule against a real local Host child process and judges it: setup through
 * the Host API (every create sent twice with one Idempotency-Key), message waves through the HTTP
 * producer extension, the schedule's faults, then — after the last fault — a health probe
 * (RC-04), a bounded wait for convergence, and the checkers over the workers' records and the
 * Host's own state.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  bodyOf,
  chaosWorkerSource,
  deadLetterWorkerSource,
  readRecords,
  type WorkerRecord,
} from './chaos-worker.ts';
import {
  type Accepted,
  type ConcurrencyUpdate,
  checkDelivery,
  compareHeads,
  type DeliveryVerdict,
  mayBeTakenBack,
} from './checks.ts';
import { HostController, tuningFor } from './host-control.ts';
import { type BatchView, type HeadItem, HostState } from './host-state.ts';
import { isBoundary, type Schedule, type Step } from './schedule.ts';

/**
 * Handlers of `queue` running now by their records: started, not ended, not in a dead Host, and
 * started within the worker timeout (a later one was cut off).
 */
function runningHandlers(
  records: WorkerRecord[],
  queue: string,
  deaths: Map<number, number>,
  timeoutMs: number,
): number {
  const open = new Map<string, { p: number; t: number }>();
  for (const r of records) {
    if (r.ev === 'start' && r.q === queue) open.set(r.b, { p: r.p, t: r.t });
    else if (r.ev === 'end') open.delete(r.b);
  }
  const now = Date.now();
  return [...open.values()].filter((h) => !deaths.has(h.p) && now - h.t < timeoutMs).length;
}

/** How long a send is retried while the Host answers with errors (a stand-in restarting). */
const SEND_RETRY_MS = 30_000;

const FORMS = {
  queue: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
  worker: 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/',
  consumer: 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/',
};
const SPACE = 'default';
const DLQ_CONSUMER = {
  maxBatchSize: 5,
  maxBatchTimeoutSeconds: 0,
  maxConcurrency: 1,
  maxRetries: 10,
  retryDelaySeconds: 0,
};

export interface RunOptions {
  /** Keep the temporary folder (data, worker logs, Host log) instead of removing it. */
  keep?: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Bound on the wait for convergence after the last fault. */
  convergeBoundMs?: number;
}

export interface ScheduleResult {
  seed: number;
  profile: string;
  /** classic, defaults, defaults+faults or faults (see schedule.ts). */
  variant: string;
  /** The physics scale factor the schedule ran with, if any. */
  physics?: number;
  ok: boolean;
  failures: string[];
  notes: string[];
  durationMs: number;
  hostKills: number;
  crashPointKills: number;
  crashPointsMissed: number;
  hostRestarts: number;
  standInKills: number;
  standInRestarts: number;
  sendsFailed: number;
  operations: number;
  replays: number;
  delivery: DeliveryVerdict | undefined;
  unconverged: string[];
  /** Seconds the convergence wait was extended to a kept slot's deadline (the product's bound). */
  keptSlotWaits: number[];
  /**
   * Seconds it was extended for messages hidden in the main queue, none visible: held by a receive
   * whose answer was lost, or by a postponed dead-letter move, they return when that ends.
   */
  inFlightWaits?: number[];
  folder?: string;
}

interface TrackedOp {
  key: string;
  what: string;
  opId?: string;
  resourceUid?: string;
  action: 'create' | 'delete' | 'update';
  form: string;
  status?: string;
  effect?: string;
  /** The Resource generation the Operation produced. */
  generation?: number;
  /** The Host's acceptance time and the time of its last state change (epoch ms). */
  createdAt?: number;
  updatedAt?: number;
  /** Every operation id any answer for this key carried. */
  answers: Set<string>;
}

class RunFailure extends Error {}

/** Operations through the Host API, each request sent twice with the same key (a duplicate). */
class Operations {
  readonly all: TrackedOp[] = [];
  replays = 0;
  private readonly ctl: HostController;
  private readonly seed: number;
  private readonly parallel: boolean;
  private readonly settleBoundMs: number;

  /** `settleBoundMs`: at default timings an Operation a dead Host held waits out its 60 s lease. */
  constructor(ctl: HostController, seed: number, parallel: boolean, settleBoundMs = 90_000) {
    this.ctl = ctl;
    this.seed = seed;
    this.parallel = parallel;
    this.settleBoundMs = settleBoundMs;
  }

  private async submit(op: TrackedOp, send: () => Promise<{ status: number; body: unknown }>): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (!op.opId) {
      const answers = this.parallel ? await Promise.all([send(), send()]) : [await send(), await send()];
      for (const a of answers) {
        const body = a.body as { id?: string; resourceUid?: string } | undefined;
        if (a.status >= 200 && a.status < 300 && body?.id) {
          op.answers.add(body.id);
          op.opId ??= body.id;
          op.resourceUid ??= body.resourceUid;
        }
      }
      if (!op.opId) {
        if (Date.now() > deadline)
          throw new RunFailure(`${op.what}: never accepted (${answers.map((a) => a.status)})`);
        await sleep(500);
      }
    }
  }

  /** Polls until terminal; after a Host restart the request is replayed (same key) first. */
  private async settle(
    op: TrackedOp,
    replay: () => Promise<{ status: number; body: unknown }>,
  ): Promise<void> {
    const deadline = Date.now() + this.settleBoundMs;
    let incarnation = this.ctl.incarnation;
    for (;;) {
      if (this.ctl.incarnation !== incarnation) {
        incarnation = this.ctl.incarnation;
        const again = await replay();
        const id = (again.body as { id?: string } | undefined)?.id;
        if (again.status >= 200 && again.status < 300 && id) {
          op.answers.add(id);
          this.replays++;
        }
      }
      const r = await this.ctl.request('GET', `/operations/${op.opId}`).catch(() => undefined);
      const body = r?.body as
        | { status?: string; effect?: string; generation?: number; createdAt?: string; updatedAt?: string }
        | undefined;
      if (r?.status === 200 && (body?.status === 'succeeded' || body?.status === 'failed')) {
        op.status = body.status;
        op.effect = body.effect;
        op.generation = body.generation;
        if (body.createdAt) op.createdAt = Date.parse(body.createdAt);
        if (body.updatedAt) op.updatedAt = Date.parse(body.updatedAt);
        return;
      }
      if (Date.now() > deadline) {
        op.status = body?.status ?? `http ${r?.status}`;
        throw new RunFailure(
          `${op.what}: not terminal after ${this.settleBoundMs / 1000} s (${JSON.stringify(r?.body)})`,
        );
      }
      await sleep(150);
    }
  }

  async create(kind: 'queue' | 'worker' | 'consumer', name: string, spec: unknown): Promise<string> {
    const op: TrackedOp = {
      key: `chaos-${this.seed}-create-${name}`,
      what: `create ${kind} ${name}`,
      action: 'create',
      form: FORMS[kind],
      answers: new Set(),
    };
    this.all.push(op);
    const send = () =>
      this.ctl.request('POST', '/resources', {
        body: { form: FORMS[kind], space: SPACE, name, spec },
        headers: { 'idempotency-key': op.key },
      });
    await this.submit(op, send);
    await this.settle(op, send);
    if (op.status !== 'succeeded' || !op.resourceUid)
      throw new RunFailure(`${op.what}: ${op.status}/${op.effect}`);
    return op.resourceUid;
  }

  /**
   * Updates a Resource's spec as a user does: PUT with the generation it has now, each request
   * sent twice with one key, then polled until terminal. Resolves to the succeeded Operation.
   */
  async update(
    kind: 'consumer',
    name: string,
    uid: string,
    generation: number,
    spec: unknown,
  ): Promise<TrackedOp> {
    const op: TrackedOp = {
      key: `chaos-${this.seed}-update-${name}-${generation}`,
      what: `update ${kind} ${name} (generation ${generation})`,
      action: 'update',
      form: FORMS[kind],
      answers: new Set(),
      resourceUid: uid,
    };
    this.all.push(op);
    const send = () =>
      this.ctl.request('PUT', `/resources/${uid}`, {
        body: { spec },
        headers: { 'idempotency-key': op.key, 'takoform-expected-generation': String(generation) },
      });
    await this.submit(op, send);
    await this.settle(op, send);
    if (op.status !== 'succeeded') throw new RunFailure(`${op.what}: ${op.status}/${op.effect}`);
    return op;
  }

  async remove(kind: 'queue', name: string, uid: string): Promise<void> {
    const op: TrackedOp = {
      key: `chaos-${this.seed}-delete-${name}`,
      what: `delete ${kind} ${name}`,
      action: 'delete',
      form: FORMS[kind],
      answers: new Set(),
      resourceUid: uid,
    };
    this.all.push(op);
    const send = () =>
      this.ctl.request('DELETE', `/resources/${uid}`, {
        headers: { 'idempotency-key': op.key, 'takoform-expected-generation': '1' },
      });
    await this.submit(op, send);
    await this.settle(op, send);
    if (op.status !== 'succeeded') throw new RunFailure(`${op.what}: ${op.status}/${op.effect}`);
  }
}

/** Watches batch heads while the run goes: a settlement, outcome or close that changes is a flip. */
class FlipWatcher {
  readonly flips: string[] = [];
  /** Heads that disappeared while open and undecided (`mayBeTakenBack`): flips if a handler started them. */
  readonly vanished = new Set<string>();
  private readonly heads = new Map<string, HeadItem>();
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly state: HostState;

  constructor(state: HostState) {
    this.state = state;
  }

  observe(view: BatchView): void {
    for (const [id, before] of this.heads) {
      const after = view.heads.get(id);
      if (!after && mayBeTakenBack(before)) {
        this.vanished.add(id);
        this.heads.delete(id);
        continue;
      }
      for (const f of compareHeads(before, after)) if (!this.flips.includes(f)) this.flips.push(f);
    }
    for (const [id, head] of view.heads) this.heads.set(id, head);
  }

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        try {
          this.observe(await this.state.batches());
        } catch {
          // a stand-in or the Host is down: read again later
        }
        await sleep(1_000);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

export async function runSchedule(s: Schedule, o: RunOptions = {}): Promise<ScheduleResult> {
  const started = Date.now();
  const log = (line: string) => o.log?.(`+${((Date.now() - started) / 1000).toFixed(1)}s ${line}`);
  const root = mkdtempSync(path.join(os.tmpdir(), `takoform-chaos-${s.seed}-`));
  const dataDir = path.join(root, 'data');
  const workersDir = path.join(root, 'workers');
  const mainLog = path.join(root, 'main.jsonl');
  const dlqLog = path.join(root, 'dlq.jsonl');
  mkdirSync(path.join(workersDir, SPACE), { recursive: true });
  const tuning = tuningFor(s);
  const workerTimeoutMs = tuning.workerTimeoutSeconds * 1000;
  // The probe message (seq = messages) is plain: acknowledged on its first delivery.
  const plans = [...s.plans, { modes: ['ok' as const], slowMs: 50 }];
  writeFileSync(path.join(workersDir, SPACE, 'cw.mjs'), chaosWorkerSource(mainLog, plans, workerTimeoutMs));
  writeFileSync(path.join(workersDir, SPACE, 'dw.mjs'), deadLetterWorkerSource(dlqLog));

  const ctl = new HostController({
    dataDir,
    workersDir,
    logFile: path.join(root, 'host.log'),
    arms: s.arms,
    tuning,
  });
  const state = new HostState(ctl);
  const watcher = new FlipWatcher(state);
  const ops = new Operations(ctl, s.seed, s.parallelDuplicates, s.timing === 'default' ? 150_000 : 90_000);
  const failures: string[] = [];
  const notes: string[] = [];
  const accepted: Accepted[] = [];
  const unconfirmedBodies: string[] = [];
  const concurrencyUpdates: ConcurrencyUpdate[] = [];
  let sendsFailed = 0;
  /** Messages of multi-message sends that failed: never committed, so they may stay hidden in SQS. */
  let uncommittable = 0;
  let delivery: DeliveryVerdict | undefined;
  let unconverged: string[] = [];
  const keptSlotWaits: number[] = [];
  const inFlightWaits: number[] = [];
  const result = (): ScheduleResult => {
    const ev = ctl.events;
    const count = (k: string) => ev.filter((e) => e.kind === k).length;
    return {
      seed: s.seed,
      profile: s.profile,
      variant: s.variant,
      ...(s.physics !== undefined ? { physics: s.physics } : {}),
      ok: failures.length === 0,
      failures,
      notes,
      durationMs: Date.now() - started,
      hostKills: count('kill9') + count('crash'),
      crashPointKills: count('crash'),
      crashPointsMissed: count('crash-missed'),
      hostRestarts: Math.max(0, count('start') - 1),
      standInKills: count('standin-kill'),
      standInRestarts: count('standin-back'),
      sendsFailed,
      operations: ops.all.length,
      replays: ops.replays,
      delivery,
      unconverged,
      keptSlotWaits,
      inFlightWaits,
      // A failed schedule's folder (data, worker records, Host log) is always kept for diagnosis.
      ...(o.keep || failures.length > 0 ? { folder: root } : {}),
    };
  };

  const send = async (queueUid: string, items: { seq: number }[]): Promise<void> => {
    const body = {
      messages: items.map((m) => ({ body: Buffer.from(bodyOf(s.seed, m.seq)).toString('base64') })),
    };
    // A producer retries for as long as a stand-in restart can take (DynamoDB Local's JVM needs
    // up to ~12 s on a loaded machine), not for a fixed count of quick tries.
    const giveUpAt = Date.now() + SEND_RETRY_MS;
    for (let attempt = 0; attempt === 0 || Date.now() < giveUpAt; attempt++) {
      try {
        const r = await ctl.request('POST', `/ext/queues/v1/queues/${queueUid}/messages`, {
          body,
          api: false,
          tries: 1,
        });
        const ids = (r.body as { messageIds?: string[] } | undefined)?.messageIds;
        if (r.status === 200 && ids?.length === items.length) {
          ids.forEach((id, i) => {
            const seq = (items[i] as { seq: number }).seq;
            accepted.push({ id, seq, body: bodyOf(s.seed, seq) });
          });
          return;
        }
        sendsFailed++;
      } catch {
        sendsFailed++; // no answer: the messages may or may not be in the queue
      }
      for (const m of items) unconfirmedBodies.push(bodyOf(s.seed, m.seq));
      if (items.length > 1) uncommittable += items.length;
      await sleep(Math.min(2_000, 400 * 2 ** Math.min(attempt, 3)));
    }
    throw new RunFailure(`send of ${items.length} message(s) never confirmed in ${SEND_RETRY_MS / 1000} s`);
  };

  if (s.updates.length > 0)
    notes.push(`maxConcurrency ${s.consumer.maxConcurrency} → ${s.updates.join(' → ')} while handlers ran`);
  if (s.lostAnswers) notes.push('with lost answers, overlapping invocations and Lambda cut-offs');
  try {
    log(`seed ${s.seed}: folder ${root}`);
    await ctl.ready();
    // --- Setup: queues and workers, then the consumers (each create sent twice, one key).
    const c = s.consumer;
    const [mainQueue, dlq, worker, dlqWorker] = await Promise.all([
      ops.create('queue', 'q', { messageRetentionSeconds: 86_400 }),
      c.deadLetter ? ops.create('queue', 'dlq', { messageRetentionSeconds: 86_400 }) : undefined,
      ops.create('worker', 'cw', {}),
      c.deadLetter ? ops.create('worker', 'dw', {}) : undefined,
    ]);
    const consumerSpec: Record<string, unknown> = {
      queue: { resourceUid: mainQueue },
      worker: { resourceUid: worker },
      maxBatchSize: c.maxBatchSize,
      maxBatchTimeoutSeconds: c.maxBatchTimeoutSeconds,
      maxConcurrency: c.maxConcurrency,
      maxRetries: c.maxRetries,
      retryDelaySeconds: c.retryDelaySeconds,
    };
    if (dlq) consumerSpec.deadLetterQueue = { resourceUid: dlq };
    const [mainConsumer] = await Promise.all([
      ops.create('consumer', 'c', consumerSpec),
      dlq && dlqWorker
        ? ops.create('consumer', 'dc', {
            queue: { resourceUid: dlq },
            worker: { resourceUid: dlqWorker },
            ...DLQ_CONSUMER,
          })
        : Promise.resolve(undefined),
    ]);
    const evidence = async () => {
      // Records first, then the table: a handler's records follow the Host's writes (a batch is
      // registered before its handler starts, a settlement is durable before it resolves), so
      // every record read here has its state in the later scan.
      const records = readRecords(mainLog).records;
      const deadLetterRecords = readRecords(dlqLog).records;
      const deaths = ctl.deaths();
      const view = await state.batches();
      watcher.observe(view);
      return {
        maxRetries: c.maxRetries,
        maxConcurrency: c.maxConcurrency,
        concurrencyUpdates,
        deadLetter: c.deadLetter,
        mainQueue: 'q',
        mainConsumerUid: mainConsumer,
        ...(dlq ? { deadLetterQueue: 'dlq', deadLetterConcurrency: DLQ_CONSUMER.maxConcurrency } : {}),
        accepted,
        unconfirmedBodies,
        records,
        deadLetterRecords,
        view,
        deaths,
        workerTimeoutMs,
      };
    };
    /** What still keeps the run from its final state (empty: every message has its final fate). */
    const progress = async (): Promise<{ blockers: string[]; verdict?: DeliveryVerdict }> => {
      const blockers: string[] = [];
      try {
        const e = await evidence();
        const verdict = checkDelivery(e);
        if (verdict.lost.length)
          blockers.push(
            `${verdict.lost.length} without a final fate: ${verdict.lost.slice(0, 5).join(', ')}`,
          );
        // Finished: closed, and applied or no longer holding its slot (freeing the slot is what
        // ends a batch whose decisions needed nothing more; see DeliveryService.apply).
        const holding = new Set([...e.view.slots.values()].flat());
        const open = [...e.view.heads.values()].filter(
          (h) => !h.closed || (!h.applied && holding.has(h.batchId)),
        );
        if (open.length) blockers.push(`${open.length} batch(es) not finished`);
        const main = await state.counts(mainQueue);
        const left = main ? main.visible + main.inFlight + main.delayed : -1;
        if (left < 0 || left > uncommittable) blockers.push(`main queue holds ${left} message(s)`);
        if (dlq) {
          const d = await state.counts(dlq);
          const dl = d ? d.visible + d.inFlight + d.delayed : -1;
          if (dl !== 0) blockers.push(`dead-letter queue holds ${dl} message(s)`);
        }
        return { blockers, verdict };
      } catch (err) {
        blockers.push(`state not readable: ${(err as Error).message}`);
        return { blockers };
      }
    };
    watcher.start();
    log(`seed ${s.seed}: setup done`);

    // --- The schedule's steps.
    const extraQueues = new Map<string, string>();
    let boundary = 0;
    let consumerGeneration = 1;
    /** Waits (bounded) until `n` handlers of the main queue run; returns the most seen at once. */
    const untilRunning = async (n: number, boundMs: number): Promise<number> => {
      const deadline = Date.now() + boundMs;
      let most = 0;
      while (most < n && Date.now() < deadline) {
        most = Math.max(
          most,
          runningHandlers(readRecords(mainLog).records, 'q', ctl.deaths(), workerTimeoutMs),
        );
        if (most < n) await sleep(100);
      }
      return most;
    };
    /** Sends the update and records when the Host accepted it and when it succeeded. */
    const updateConcurrency = async (maxConcurrency: number): Promise<void> => {
      // Recorded before the request leaves: from then on the Host may apply the new bound.
      const update: ConcurrencyUpdate = { maxConcurrency, acceptedAt: Date.now() };
      concurrencyUpdates.push(update);
      const op = await ops.update('consumer', 'c', mainConsumer, consumerGeneration, {
        ...consumerSpec,
        maxConcurrency,
      });
      consumerGeneration = op.generation ?? consumerGeneration + 1;
      update.generation = consumerGeneration;
      // The Host's own times, on this machine's clock: acceptance, and the success's state change.
      if (op.createdAt !== undefined) update.acceptedAt = op.createdAt;
      update.succeededAt = op.updatedAt ?? Date.now();
      log(
        `seed ${s.seed}: maxConcurrency ${maxConcurrency} since ${new Date(update.succeededAt).toISOString()}`,
      );
    };
    const runStep = async (step: Step): Promise<void> => {
      switch (step.kind) {
        case 'send': {
          const requests: { seq: number }[][] = step.multi
            ? [step.seqs.map((seq) => ({ seq }))]
            : step.seqs.map((seq) => [{ seq }]);
          for (const seq of step.duplicates) requests.push([{ seq }]);
          // A few requests at a time, in a fixed order.
          for (let i = 0; i < requests.length; i += 4)
            await Promise.all(requests.slice(i, i + 4).map((r) => send(mainQueue, r)));
          return;
        }
        case 'pause':
          await sleep(step.ms);
          return;
        case 'update':
          await updateConcurrency(step.maxConcurrency);
          return;
        case 'busy': {
          const most = await untilRunning(step.atLeast, step.boundMs);
          if (most < step.atLeast)
            notes.push(`at most ${most} handler(s) ran at once before the update (wanted ${step.atLeast})`);
          return;
        }
        case 'standin':
          await sleep(step.afterMs);
          if (!(await ctl.killStandIn(step.which))) notes.push(`stand-in ${step.which} not seen back`);
          if (step.again !== undefined) {
            await sleep(step.again);
            if (!(await ctl.killStandIn(step.which))) notes.push(`stand-in ${step.which} not seen back`);
          }
          return;
        case 'ops': {
          const uid = await ops.create('queue', step.name, { messageRetentionSeconds: 3_600 });
          extraQueues.set(step.name, uid);
          if (step.remove) {
            await ops.remove('queue', step.name, uid);
            extraQueues.delete(step.name);
          }
          return;
        }
        case 'crash':
        case 'kill9':
        case 'term': {
          const index = boundary++;
          if (ctl.incarnation > index) return; // its crash point fired already
          if (step.kind === 'crash') {
            const idle = async () => (await progress()).blockers.length === 0;
            if ((await ctl.awaitCrash(step.boundMs, idle)) === 'missed')
              notes.push(`crash point ${step.point}@${step.nth} not reached; kill -9 instead`);
          } else if (step.kind === 'kill9') {
            await sleep(step.afterMs);
            await ctl.kill9();
          } else if (!(await ctl.term())) {
            failures.push('SIGTERM did not stop the Host with exit code 0');
          }
          await ctl.ready();
          return;
        }
      }
    };
    for (const step of s.steps) {
      log(`seed ${s.seed}: ${step.kind}${isBoundary(step) ? ` (incarnation ${ctl.incarnation})` : ''}`);
      await runStep(step);
    }

    log(`seed ${s.seed}: faults done; health probe`);
    // --- After the last fault: the Host is healthy again by itself (RC-04).
    const probeDeadline = Date.now() + 30_000;
    let discovery = 0;
    while (discovery !== 200 && Date.now() < probeDeadline) {
      discovery = (
        await ctl.request('GET', '/.well-known/takoform/v2', { api: false }).catch(() => ({ status: 0 }))
      ).status;
      if (discovery !== 200) await sleep(300);
    }
    if (discovery !== 200) failures.push(`RC-04: discovery answered ${discovery} after the faults`);
    const probeQueue = await ops.create('queue', 'probe', { messageRetentionSeconds: 3_600 });
    await ops.remove('queue', 'probe', probeQueue);
    await send(mainQueue, [{ seq: s.messages }]);

    log(`seed ${s.seed}: probe sent; waiting for convergence`);
    // --- Convergence: every accepted message has its final fate (bounded wait).
    // At default timings the longest legitimate wait is a slot whose lane failed before its
    // handler started: held for its gathering (idle wait 10 s + batch timeout + 60 s), then the
    // delivery itself; shortened timings converge in seconds.
    let deadline = Date.now() + (o.convergeBoundMs ?? (s.timing === 'default' ? 120_000 : 60_000));
    // A slot kept because its handler may still run (its invocation failed after registration) is
    // held until its deadline — at default timings up to the worker timeout, 15 minutes — and may
    // be all a lowered maxConcurrency allows. That is the product's documented bound, so the wait
    // extends to it (plus the grace, a supervisor round and the delivery), once, and is reported.
    let waitedForKeptSlot = false;
    const round = s.timing === 'default' ? 60_000 : 5_000;
    const keptUntil = async (): Promise<number | undefined> => {
      const view = await state.batches().catch(() => undefined);
      if (!view) return undefined;
      // Any slot still held past the bound is kept: gathering, running, or closed by a runner
      // whose handler was cut off and may still run. One whose deadline passed less than a
      // supervisor round ago is still held too: the next round (or take) recovers it.
      const held = [...view.slots.values()].flat();
      const ends = held.map((id) => view.deadlines?.get(id) ?? 0).filter((d) => d > Date.now() - round);
      return ends.length > 0 ? Math.max(...ends) : undefined;
    };
    let lastLog = Date.now();
    let quiet = 0;
    for (;;) {
      const { blockers, verdict } = await progress();
      // Judged on the second quiet read in a row: by then every record of the last batches is written.
      quiet = blockers.length === 0 && verdict ? quiet + 1 : 0;
      if (quiet === 2) {
        delivery = verdict;
        break;
      }
      if (Date.now() - lastLog > 5_000) {
        lastLog = Date.now();
        log(`seed ${s.seed}: waiting for ${blockers.join('; ')}`);
      }
      if (Date.now() > deadline && quiet === 0 && !waitedForKeptSlot) {
        waitedForKeptSlot = true;
        const until = await keptUntil();
        if (until !== undefined && until - Date.now() < 20 * 60_000) {
          const grace = s.timing === 'default' ? 60_000 : 1_000;
          deadline = Math.max(until, Date.now()) + grace + round + 60_000;
          keptSlotWaits.push(Math.round((deadline - Date.now()) / 1000));
          log(`seed ${s.seed}: a kept slot holds until ${new Date(until).toISOString()}; waiting for it`);
          continue;
        }
        // Messages only hidden (none visible), every other message final and every batch
        // finished: a receive whose answer was lost hides its messages for the receive's
        // visibility (gathering plus room to register), a postponed dead-letter move for its
        // delay. They return by themselves, and a lane then takes them: wait that long, once.
        const main = await state.counts(mainQueue).catch(() => undefined);
        const onlyQueue = blockers.every((b) => b.startsWith('main queue holds'));
        if (onlyQueue && main && main.visible === 0 && main.inFlight + main.delayed > 0) {
          const hold = (s.timing === 'default' ? 20_000 + 60_000 : 10_000) + 30_000;
          deadline = Date.now() + hold + round + 30_000;
          inFlightWaits.push(Math.round((deadline - Date.now()) / 1000));
          log(
            `seed ${s.seed}: ${main.inFlight + main.delayed} message(s) hidden in the main queue; waiting for them`,
          );
          continue;
        }
      }
      if (Date.now() > deadline && quiet === 0) {
        unconverged = blockers;
        failures.push(`unconverged: ${blockers.join('; ')}`);
        delivery = checkDelivery(await evidence());
        break;
      }
      await sleep(500);
    }

    log(`seed ${s.seed}: converged; checking`);
    // --- Verdicts.
    const v = delivery;
    if (v) {
      if (!unconverged.length && v.lost.length)
        failures.push(`lost ${v.lost.length}: ${v.lost.slice(0, 10).join(', ')}`);
      const started = new Set(
        [...readRecords(mainLog).records, ...readRecords(dlqLog).records].flatMap((r) =>
          r.ev === 'start' ? [r.b] : [],
        ),
      );
      for (const id of watcher.vanished) {
        if (started.has(id)) watcher.flips.push(`${id}: head disappeared after its handler started`);
      }
      const lists: [string, string[]][] = [
        ['flips', [...v.flips, ...watcher.flips]],
        ['concurrency breaches', v.breaches],
        ['attempt anomalies (DL-07)', v.attemptAnomalies],
        ['deliveries beyond 1 + maxRetries (DL-07)', v.beyondRetries],
        ['first settlements refused already_settled (DL-03)', v.refusedFirstSettlements],
        ['unknown settlement acknowledged (DL-08)', v.unknownSettlementAcked],
        ['outcome better than the handler’s', v.wrongOutcome],
        ['acknowledged and exhausted', v.conflicts],
        ['unexplained dead letters', v.unexplainedDeadLetters],
        ['batches unknown to the Host', v.orphanBatches],
      ];
      for (const [what, list] of lists)
        if (list.length) failures.push(`${what} ${list.length}: ${list.slice(0, 5).join('; ')}`);
      v.flips = [...v.flips, ...watcher.flips];
      const probe = accepted.find((a) => a.seq === s.messages);
      const probeSeen =
        probe && readRecords(mainLog).records.some((r) => r.ev === 'msg' && r.id === probe.id);
      if (!probeSeen) failures.push('RC-04: the probe message sent after the faults was not delivered');
    }

    // --- Operations: replays agree, everything terminal and succeeded, one SQS queue per live queue.
    for (const op of ops.all) {
      if (op.answers.size > 1) failures.push(`${op.what}: one key answered ${op.answers.size} Operations`);
      if (op.status !== 'succeeded') failures.push(`${op.what}: ${op.status}/${op.effect}`);
    }
    const names = new Set(await state.sqsQueueNames());
    const liveQueues = ops.all.filter((op) => op.action === 'create' && op.form === FORMS.queue);
    const deleted = new Set(ops.all.filter((op) => op.action === 'delete').map((op) => op.resourceUid));
    const list = await ctl.request('GET', `/resources?space=${SPACE}&limit=100`);
    const listed = (
      (list.body as { items?: { uid: string; form: string; name: string }[] })?.items ?? []
    ).filter((r) => r.form === FORMS.queue);
    for (const op of liveQueues) {
      const name = `takoform-${op.resourceUid}`;
      if (deleted.has(op.resourceUid)) {
        if (names.has(name)) failures.push(`${op.what}: deleted, but its SQS queue exists`);
      } else if (!names.has(name)) failures.push(`${op.what}: live, but it has no SQS queue`);
    }
    const listedUids = new Set(listed.map((r) => r.uid));
    for (const n of names) {
      if (!listedUids.has(n.slice('takoform-'.length)))
        failures.push(`SQS queue ${n} belongs to no live queue Resource`);
    }
    if (listed.length !== new Set(listed.map((r) => r.name)).size)
      failures.push('two queue Resources share a name');
    if (listed.length !== liveQueues.length - deleted.size)
      failures.push(`${listed.length} live queue Resources, expected ${liveQueues.length - deleted.size}`);
  } catch (err) {
    failures.push(`run aborted: ${(err as Error).message}`);
  } finally {
    await watcher.stop();
    state.close();
    const { cleanExit } = await ctl.close().catch(() => ({ cleanExit: false }));
    if (!cleanExit) failures.push('the final SIGTERM did not stop the Host with exit code 0');
    for (const e of ctl.events)
      if (e.kind === 'unexpected-exit') failures.push(`Host incarnation ${e.incarnation}: ${e.detail}`);
    if (!o.keep && failures.length === 0) rmSync(root, { recursive: true, force: true });
  }
  return result();
}
