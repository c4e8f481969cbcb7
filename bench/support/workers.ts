/**
 * Worker modules the bench runs. Each is a plain ModuleWorker (`export default { queue }`) that
 * the Host treats like any user's code; what it measures it appends as JSON lines to the file
 * named by `env.RECORDS`. Times are epoch milliseconds with sub-millisecond precision
 * (`performance.timeOrigin + performance.now()`), comparable across threads.
 */

/** Returns at once: every message is acknowledged implicitly on return. */
export const NOOP_WORKER = `export default { async queue() {} };\n`;

/** Sleeps `env.BASE_MS ± env.JITTER_MS` (uniform) per batch and records when it ran. */
export const SLEEPING_WORKER = `
import { appendFileSync } from 'node:fs';
const now = () => performance.timeOrigin + performance.now();
export default {
  async queue(batch, env) {
    const start = now();
    const ms = env.BASE_MS + (Math.random() * 2 - 1) * env.JITTER_MS;
    await new Promise((r) => setTimeout(r, ms));
    appendFileSync(env.RECORDS, JSON.stringify({ start, end: now(), size: batch.messages.length }) + '\\n');
  },
};
`;

/** Acknowledges each message on its own and records how long each call took (and when it ran). */
export const ACK_WORKER = `
import { appendFileSync } from 'node:fs';
const now = () => performance.timeOrigin + performance.now();
export default {
  async queue(batch, env) {
    const start = now();
    const ms = [];
    for (const m of batch.messages) {
      const t0 = now();
      await batch.acknowledge(m.id);
      ms.push(now() - t0);
    }
    appendFileSync(env.RECORDS, JSON.stringify({ kind: 'acknowledge', ms, start, end: now() }) + '\\n');
  },
};
`;

/** Acknowledges the whole batch with one call and records how long it took. */
export const ACK_ALL_WORKER = `
import { appendFileSync } from 'node:fs';
const now = () => performance.timeOrigin + performance.now();
export default {
  async queue(batch, env) {
    const t0 = now();
    await batch.acknowledgeAll();
    const end = now();
    appendFileSync(env.RECORDS, JSON.stringify({ kind: 'acknowledgeAll', ms: [end - t0], start: t0, end }) + '\\n');
  },
};
`;

/** Records when the handler started, per message id (for send-to-handler latency). */
export const ARRIVAL_WORKER = `
import { appendFileSync } from 'node:fs';
const now = () => performance.timeOrigin + performance.now();
export default {
  async queue(batch, env) {
    const at = now();
    appendFileSync(env.RECORDS, JSON.stringify({ at, ids: batch.messages.map((m) => m.id) }) + '\\n');
  },
};
`;

/**
 * Records when each batch's handler started, the send time (`timestampMillis`) of each message,
 * and how long reading the batch took (`ms`: the handler's own work, the record's write aside).
 */
export const STEADY_WORKER = `
import { appendFileSync } from 'node:fs';
export default {
  async queue(batch, env) {
    const t0 = performance.now();
    const at = Date.now();
    const ts = batch.messages.map((m) => m.timestampMillis);
    appendFileSync(env.RECORDS, JSON.stringify({ at, ts, ms: performance.now() - t0 }) + '\\n');
  },
};
`;

/** Sleeps `env.MS` per batch (the scale bench's handler of a few milliseconds). */
export const SLEEP_WORKER = `export default { async queue(batch, env) { await new Promise((r) => setTimeout(r, env.MS)); } };\n`;

/** Throws on every batch (the scale bench's retry storm). */
export const THROWING_WORKER = `export default { async queue() { throw new Error('every handler throws'); } };\n`;
