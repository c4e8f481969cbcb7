/**
 * CloudWatch Logs bills every GB the Host's functions write ($0.50 a GB, Standard class). The
 * bench counts those bytes per context: Lambda's own lines per invocation, the Host's lines as
 * Powertools Logger prints them, and the lines the entries write around the core, which the bench
 * does not run and so rebuilds (`bench/support/log-meter.ts`); each model is checked here against
 * the real thing.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isDelivery } from '../../../bench/per-batch.ts';
import { usd } from '../../../bench/pricing.ts';
import {
  batchHostLogBytes,
  emfBytes,
  installLogMeter,
  lineBytes,
  taskLogBytes,
} from '../../../bench/support/log-meter.ts';
import {
  addTallies,
  attribute,
  LAMBDA_PLATFORM_LOG_BYTES,
  Meter,
  type Tally,
} from '../../../bench/support/meter.ts';
import type { AwsHost } from '../../../lambdas/composition/aws-host.ts';
import { powertoolsSink } from '../../../lambdas/composition/powertools-log.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { type LogFields, type LogLevel, log, setLogSink } from '../../../lambdas/shared/log.ts';

const GB = 1024 ** 3;
const tally = (logs: Record<string, number>): Tally => ({
  sdk: {},
  lambda: {},
  logs,
  transitions: {},
  executions: 0,
});

/** Every line the Host writes while `fn` runs, with the keys its sink receives. */
async function linesOf(fn: () => Promise<unknown>) {
  const lines: { level: LogLevel; message: string; fields: LogFields }[] = [];
  const previous = setLogSink((level, message, fields) => lines.push({ level, message, fields }));
  try {
    await fn();
  } finally {
    setLogSink(previous);
  }
  return lines;
}

const bytesOf = (
  lines: { level: LogLevel; message: string; fields: LogFields }[],
  fn: 'batchHost' | 'step',
) => lines.reduce((n, l) => n + lineBytes(fn, l.level, l.message, l.fields), 0);

describe('CloudWatch Logs pricing', () => {
  it('prices the bytes counted in the kept contexts at $0.50 per GB', () => {
    const t = tally({ 'batch-host:register': 0.75 * GB, 'step:AcquireSlot': 0.25 * GB, setup: 2 * GB });
    const delivery = usd(t, isDelivery);
    expect(delivery.logs).toBeCloseTo(0.5, 12);
    expect(delivery.total).toBeCloseTo(0.5, 12);
    expect(usd(t, () => true).logs).toBeCloseTo(1.5, 12);
    // Results from before logs were counted have none.
    expect(usd({ sdk: {}, lambda: {}, transitions: {}, executions: 0 }, () => true).logs).toBe(0);
  });

  it("counts Lambda's START, END and REPORT lines per invocation, and adds tallies' bytes", () => {
    const meter = new Meter();
    meter.lambda('step:AcquireSlot', 12);
    meter.lambda('step:AcquireSlot', 3);
    meter.lambdaStarted('worker:InvokeWorker');
    meter.logged('worker:InvokeWorker', 100);
    const t = meter.reset();
    expect(t.logs).toEqual({
      'step:AcquireSlot': 2 * LAMBDA_PLATFORM_LOG_BYTES,
      'worker:InvokeWorker': LAMBDA_PLATFORM_LOG_BYTES + 100,
    });
    expect(addTallies([t, tally({ 'step:AcquireSlot': 1 })]).logs?.['step:AcquireSlot']).toBe(
      2 * LAMBDA_PLATFORM_LOG_BYTES + 1,
    );
  });
});

describe('the log lines the bench counts', () => {
  let restore: (() => void) | undefined;
  beforeEach(() => {
    const previous = setLogSink(() => {});
    restore = () => setLogSink(previous);
  });
  afterEach(() => restore?.());

  it('sizes a line exactly as Powertools Logger prints it in a warm invocation', () => {
    vi.stubEnv(
      '_X_AMZN_TRACE_ID',
      'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1',
    );
    const name = 'TakoformHost-DeliveryBatchHostFunction'.padEnd(64, 'x');
    // What Powertools reads of the invocation's context.
    const context = {
      functionName: name,
      invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${name}`,
      memoryLimitInMB: '1024',
      awsRequestId: 'c6af9ac6-7b61-11e6-9a41-93e812345678',
    } as unknown as Context;
    const logger = new Logger({ serviceName: 'takoform-batch-host' });
    logger.addContext(context);
    logger.addContext(context); // the second invocation of the sandbox: no longer a cold start
    const printed: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
      printed.push(String(chunk));
      return true;
    });
    const fields = { batchId: 'b-1', outcome: 'returned', err: Object.assign(new Error('x'), { code: 'E' }) };
    try {
      setLogSink(powertoolsSink(logger));
      log.info('batch finalize', fields);
    } finally {
      spy.mockRestore();
      vi.unstubAllEnvs();
    }
    expect(printed).toHaveLength(1);
    expect(lineBytes('batchHost', 'info', 'batch finalize', fields)).toBe(
      Buffer.byteLength(printed[0] ?? ''),
    );
  });

  it("counts the Host's INFO and higher lines into the meter of the role they are written in", () => {
    installLogMeter();
    const meter = new Meter();
    attribute(
      'batch-host:finalize',
      () => {
        log.info('message retried', { messageId: 'm1', attempts: 2 });
        log.debug('not at the deployed level', {});
        attribute('setup', () => log.warn('no function writes this', {}));
      },
      meter,
    );
    log.warn('outside any function', {});
    expect(meter.reset().logs).toEqual({
      'batch-host:finalize': lineBytes('batchHost', 'info', 'message retried', {
        messageId: 'm1',
        attempts: 2,
      }),
    });
  });

  it("rebuilds the batch host's lines for a call as its entry writes them", async () => {
    const slot = {
      batchId: 'b-1',
      consumerUid: 'r-consumer',
      generation: 1,
      queueUid: 'r-queue',
      queueName: 'orders',
      sqsUrl: 'http://sqs/q',
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 1,
      deadline: 1,
      invisibleUntil: 1,
      workerUid: 'r-worker',
      workerSpace: 'default',
      workerName: 'w',
      workerFunction: 'fn',
      maxConcurrency: 1,
      maxRetries: 3,
      retryDelaySeconds: 0,
      handlerMs: 30_000,
      seal: 's',
    };
    const received = ['m1', 'm2', 'm3'].map((id) => ({
      receiptHandle: `h-${id}`,
      receivedAt: 1,
      envelope: { id, ts: 1 },
    }));
    const registration = { credential: 'c', deliver: [0, 2].map((i) => ({ received: i, attempts: 1 })) };
    const answers: Record<string, unknown> = { register: registration, finalize: { next: undefined } };
    const host = {
      batchHost: { handle: async (r: { action: string }) => answers[r.action] },
    } as unknown as AwsHost;
    const handler = createBatchHostHandler(host);

    const register = await linesOf(() => handler({ action: 'register', slot, received }));
    expect(batchHostLogBytes('batch-host:register', [slot, received], { out: registration })).toBe(
      bytesOf(register, 'batchHost'),
    );
    const finalize = await linesOf(() =>
      handler({ action: 'finalize', slot, credential: 'c', outcome: 'threw' }),
    );
    // The entry also publishes the batch's metrics as one EMF line.
    const metrics = emfBytes('batchHost', { BatchesFinalized: 1, WorkerBatchFailures: 1 });
    expect(
      batchHostLogBytes('batch-host:finalize', ['b-1', 'c', 'threw', { slot }], { out: {} }) - metrics,
    ).toBe(bytesOf(finalize, 'batchHost'));
    expect(batchHostLogBytes('batch-host:settle', ['b-1', 'c', { kind: 'ackAll' }], { out: undefined })).toBe(
      0,
    );
  });

  it("rebuilds the dispatcher step's line for a Task as its entry writes it", async () => {
    const result = { status: 'taken', slot: { batchId: 'b-7', consumerUid: 'r-consumer' } };
    const host = { host: { loop: { step: async () => result } } } as unknown as AwsHost;
    const input = { action: 'acquire', lane: { consumerUid: 'r-consumer', generation: 3 } };
    const lines = await linesOf(() => createDispatcherStepHandler(host)(input));
    expect(taskLogBytes('step:AcquireSlot', input, result)).toBe(bytesOf(lines, 'step'));
  });
});
