/**
 * The traffic-shape bench's two sizes. Both use AWS's idle wait (20 s): lanes hold it for messages
 * no wake announces and inside a due lane's window, so a shorter local wait would price a
 * different Host.
 * The full windows are long enough that lanes a stream starts and that run dry end inside them;
 * the quick ones only show the scenario runs.
 */
import type { ShapesConfig } from './model.ts';

const CONSUMER = { maxBatchSize: 100, maxBatchTimeoutSeconds: 5, maxConcurrency: 10 };
const STREAM_RATES = [1, 10, 100, 1_000];
/** One message a minute, and one every 10 s. */
const COMPOSED_GAPS = [60, 10];

export const SHAPES_FULL: ShapesConfig = {
  mode: 'full',
  consumer: CONSUMER,
  idleWaitSeconds: 20,
  streamRates: STREAM_RATES,
  timing: { warmupSeconds: 15, seconds: 45, drainTimeoutMs: 60_000 },
  tailTimeoutMs: 60_000,
  composedGaps: COMPOSED_GAPS,
  keptAlive: { messages: 4, gapSeconds: 10 },
};

export const SHAPES_QUICK: ShapesConfig = {
  ...SHAPES_FULL,
  mode: 'quick',
  timing: { warmupSeconds: 3, seconds: 12, drainTimeoutMs: 30_000 },
  keptAlive: { messages: 3, gapSeconds: 10 },
};
