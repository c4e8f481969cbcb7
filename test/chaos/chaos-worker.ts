/**
 * The worker modules of a chaos run. They record, with `appendFileSync` and before acting, every
 * batch (start, each message, the mode chosen), every settlement call and its result, and how
 * the handler ended — so the checker knows what happened even when the Host (whose worker
 * threads run these handlers) is killed. The Host never sees inside them, like a user's worker.
 */
import { readFileSync } from 'node:fs';
import type { MessagePlan } from './schedule.ts';
import { FAILING_MODES } from './schedule.ts';

/** Message bodies: `chaos:<seed>:<seq>`; the same body for a duplicate send of a message. */
export const bodyOf = (seed: number, seq: number) => `chaos:${seed}:${seq}`;
export const seqOfBody = (body: string): number | undefined => {
  const m = /^chaos:\d+:(\d+)$/.exec(body);
  return m ? Number(m[1]) : undefined;
};

/** One line of a worker log. `p` is the Host's pid (worker threads share it), `t` epoch ms. */
export type WorkerRecord =
  | { ev: 'start'; q: string; b: string; n: number; p: number; t: number }
  | { ev: 'msg'; q: string; b: string; i: number; id: string; a: number; body: string; p: number; t: number }
  | { ev: 'mode'; b: string; m: string; p: number; t: number }
  | { ev: 'call'; b: string; k: SettleKind; i?: number; p: number; t: number }
  | { ev: 'res'; b: string; k: SettleKind; i?: number; r: string; p: number; t: number }
  | { ev: 'end'; b: string; how: 'returned' | 'threw'; p: number; t: number }
  | { ev: 'beat'; b: string; p: number; t: number };
export type SettleKind = 'ack' | 'retry' | 'ackAll' | 'retryAll';

/** The main consumer's worker: behaviour per message plan, recording everything. */
export function chaosWorkerSource(log: string, plans: MessagePlan[], workerTimeoutMs: number): string {
  const table = plans.map((p) => ({ m: p.modes, w: p.slowMs }));
  return `
import { appendFileSync } from 'node:fs';
const LOG = ${JSON.stringify(log)};
const PLANS = ${JSON.stringify(table)};
const FAILING = new Set(${JSON.stringify([...FAILING_MODES])});
const HANG_MS = ${workerTimeoutMs * 5};
const rec = (o) => appendFileSync(LOG, JSON.stringify({ ...o, p: process.pid, t: Date.now() }) + '\\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (m) => Buffer.from(m.body).toString('utf8');
const seqOf = (m) => { const x = /^chaos:\\d+:(\\d+)$/.exec(text(m)); return x ? Number(x[1]) : -1; };
const planOf = (m) => PLANS[seqOf(m)] ?? { m: ['ok'], w: 50 };
const modeOf = (m) => { const p = planOf(m).m; return p[Math.min(m.attempts, p.length) - 1]; };

export default {
  async queue(batch, env, ctx) {
    const b = batch.batchId;
    rec({ ev: 'start', q: batch.queue, b, n: batch.messages.length });
    batch.messages.forEach((m, i) => rec({ ev: 'msg', q: batch.queue, b, i, id: m.id, a: m.attempts, body: text(m) }));
    const first = batch.messages[0];
    const mode = modeOf(first);
    rec({ ev: 'mode', b, m: mode });
    const settle = async (k, i, call) => {
      rec({ ev: 'call', b, k, i });
      try {
        await call();
        rec({ ev: 'res', b, k, i, r: 'resolved' });
      } catch (e) {
        rec({ ev: 'res', b, k, i, r: (e && e.name) || 'error' });
      }
    };
    const own = async (m, i) => {
      if (FAILING.has(modeOf(m))) {
        await settle('retry', i, () => (i % 2 ? batch.retry(m.id) : batch.retry(m.id, 0)));
      } else {
        await settle('ack', i, () => batch.acknowledge(m.id));
      }
    };
    let how = 'threw';
    try {
      switch (mode) {
        case 'ok':
          break;
        case 'slow':
          await sleep(planOf(first).w);
          break;
        case 'ackEach':
          for (const [i, m] of batch.messages.entries()) await settle('ack', i, () => batch.acknowledge(m.id));
          break;
        case 'ackAll':
          await settle('ackAll', undefined, () => batch.acknowledgeAll());
          break;
        case 'mixed':
          for (const [i, m] of batch.messages.entries()) await own(m, i);
          break;
        case 'mixedSlow':
          for (const [i, m] of batch.messages.entries()) await own(m, i);
          await sleep(planOf(first).w * 3);
          break;
        case 'mixedThrow': {
          const half = Math.ceil(batch.messages.length / 2);
          for (const [i, m] of batch.messages.slice(0, half).entries()) await own(m, i);
          throw new Error('mixedThrow');
        }
        case 'late':
          batch.messages.forEach((m, i) => {
            const ack = () => settle('ack', i, () => batch.acknowledge(m.id));
            if (i % 2 === 0) setTimeout(ack, 0);
            else ctx.waitUntil(sleep(20).then(ack));
          });
          break;
        case 'double':
          for (const [i, m] of batch.messages.entries()) {
            await settle('ack', i, () => batch.acknowledge(m.id));
            await settle('ack', i, () => batch.acknowledge(m.id));
            await settle('retry', i, () => batch.retry(m.id, 0));
          }
          break;
        case 'throw':
          throw new Error('throw');
        case 'retryAll':
          await settle('retryAll', undefined, () => batch.retryAll(0));
          break;
        case 'hang': {
          // Heartbeats tell the checker when the thread was cut off (it stops beating).
          const until = Date.now() + HANG_MS;
          while (Date.now() < until) {
            rec({ ev: 'beat', b });
            await sleep(20);
          }
          break;
        }
      }
      how = 'returned';
    } finally {
      rec({ ev: 'end', b, how });
    }
  },
};
`;
}

/** The dead-letter queue's consumer: records what arrives and returns (acknowledging it). */
export function deadLetterWorkerSource(log: string): string {
  return `
import { appendFileSync } from 'node:fs';
const LOG = ${JSON.stringify(log)};
const rec = (o) => appendFileSync(LOG, JSON.stringify({ ...o, p: process.pid, t: Date.now() }) + '\\n');
export default {
  async queue(batch) {
    const b = batch.batchId;
    rec({ ev: 'start', q: batch.queue, b, n: batch.messages.length });
    batch.messages.forEach((m, i) =>
      rec({ ev: 'msg', q: batch.queue, b, i, id: m.id, a: m.attempts, body: Buffer.from(m.body).toString('utf8') }));
    rec({ ev: 'end', b, how: 'returned' });
  },
};
`;
}

/** Every complete record of a log; a line cut short by a kill (none expected) is counted. */
export function readRecords(log: string): { records: WorkerRecord[]; torn: number } {
  let text = '';
  try {
    text = readFileSync(log, 'utf8');
  } catch {
    return { records: [], torn: 0 };
  }
  const records: WorkerRecord[] = [];
  let torn = 0;
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      records.push(JSON.parse(line) as WorkerRecord);
    } catch {
      torn++;
    }
  }
  return { records, torn };
}
