/**
 * The scale bench's two sizes. k = 10: the Lambda pool is 100 (so maxConcurrency 250 runs as 25
 * local lanes), a partition serves 100 WCU or 300 RCU a second, and a transaction holds its items
 * 100 ms — limits this 2-core machine reaches at the rates it sustains (a few hundred batches a
 * second at most), without 250 lanes of threads it could not run.
 */
import type { ScaleConfig } from './model.ts';

const K = 10;
const TRANSACTION_MS = 10;

export const SCALE_FULL: ScaleConfig = {
  mode: 'full',
  k: K,
  transactionMs: TRANSACTION_MS,
  drains: [
    { awsConcurrency: 250, batchSize: 10, messages: 8_000, handlerMs: 10, timeoutMs: 240_000 },
    { awsConcurrency: 250, batchSize: 100, messages: 40_000, handlerMs: 10, timeoutMs: 240_000 },
  ],
  many: {
    consumers: 1_000,
    trickles: 50,
    trickleRate: 1,
    hot: { awsConcurrency: 250, batchSize: 10, messages: 4_000, handlerMs: 10 },
    idleRounds: 3,
    loadRounds: 2,
    timeoutMs: 240_000,
  },
  storm: {
    awsConcurrency: 250,
    batchSize: 10,
    messages: 3_000,
    handlerMs: 0,
    maxRetries: 3,
    timeoutMs: 300_000,
  },
};

export const SCALE_QUICK: ScaleConfig = {
  mode: 'quick',
  k: K,
  transactionMs: TRANSACTION_MS,
  drains: [
    { awsConcurrency: 250, batchSize: 10, messages: 2_000, handlerMs: 10, timeoutMs: 60_000 },
    { awsConcurrency: 250, batchSize: 100, messages: 10_000, handlerMs: 10, timeoutMs: 60_000 },
  ],
  many: {
    consumers: 100,
    trickles: 10,
    trickleRate: 1,
    hot: { awsConcurrency: 250, batchSize: 10, messages: 1_000, handlerMs: 10 },
    idleRounds: 2,
    loadRounds: 1,
    timeoutMs: 60_000,
  },
  storm: {
    awsConcurrency: 250,
    batchSize: 10,
    messages: 500,
    handlerMs: 0,
    maxRetries: 3,
    timeoutMs: 90_000,
  },
};
