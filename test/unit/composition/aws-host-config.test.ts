import { describe, expect, it } from 'vitest';
import { readAwsHostConfig } from '../../../lambdas/composition/aws-host.ts';
import { PRODUCE_ERRORS, SETTLE_ERRORS, wireError } from '../../../lambdas/delivery/batch-host-protocol.ts';
import { NamedError } from '../../../lambdas/delivery/limits.ts';
import { sqsSearchExpression } from '../../../lambdas/shared/aws-env.ts';
import { declaredQueueHandler, workerConfigFromEnv } from '../../../lambdas/worker-runtime/lambda-adapter.ts';

describe('AWS Host configuration (read once, fail fast)', () => {
  it('reads the environment with defaults', () => {
    expect(
      readAwsHostConfig({
        TAKOFORM_TABLE: 'host-table',
        TAKOFORM_QUEUE_PREFIX: 'takoform-host_',
        TAKOFORM_PUBLIC_ORIGIN: 'https://api.example.com/',
      }),
    ).toEqual({
      tableName: 'host-table',
      queueNamePrefix: 'takoform-host_',
      publicOrigin: 'https://api.example.com',
      workerTimeoutSeconds: 810,
      idleWaitSeconds: 20,
      queueSettings: {},
    });
  });

  it('names every problem at once', () => {
    let message = '';
    try {
      readAwsHostConfig({
        TAKOFORM_QUEUE_PREFIX: 'Bad_Prefix',
        TAKOFORM_PUBLIC_ORIGIN: 'https://api.example.com/prod',
        TAKOFORM_WORKER_TIMEOUT_SECONDS: '901',
        TAKOFORM_IDLE_WAIT_SECONDS: '-1',
      });
    } catch (err) {
      message = (err as Error).message;
    }
    for (const name of [
      'TAKOFORM_TABLE',
      'TAKOFORM_QUEUE_PREFIX',
      'TAKOFORM_PUBLIC_ORIGIN',
      'TAKOFORM_WORKER_TIMEOUT_SECONDS',
      'TAKOFORM_IDLE_WAIT_SECONDS',
    ]) {
      expect(message).toContain(name);
    }
  });

  it('parses a worker configuration strictly', () => {
    expect(workerConfigFromEnv({})).toEqual({});
    expect(
      workerConfigFromEnv({
        TAKOFORM_WORKER_CONFIG: '{"vars":{"A":1},"queueProducers":{"OUT":{"queue":"q"}}}',
      }),
    ).toEqual({ vars: { A: 1 }, queueProducers: { OUT: { queue: 'q' } } });
    expect(() => workerConfigFromEnv({ TAKOFORM_WORKER_CONFIG: '{"other":1}' })).toThrow();
  });
});

describe('supervisor metrics', () => {
  it('searches SQS metrics by the queue name prefix', () => {
    expect(sqsSearchExpression('takoform-host_', 'ApproximateAgeOfOldestMessage', 'Maximum', 300)).toBe(
      `SEARCH('{AWS/SQS,QueueName} MetricName="ApproximateAgeOfOldestMessage" QueueName=takoform-host_r', 'Maximum', 300)`,
    );
  });
});

describe('batch-host wire errors', () => {
  it('pass listed names with fixed messages; anything else is backend_unavailable', () => {
    expect(wireError(new NamedError('unknown_batch', 'secret detail'), SETTLE_ERRORS)).toEqual({
      name: 'unknown_batch',
      message: SETTLE_ERRORS.unknown_batch,
    });
    expect(wireError(new TypeError('x'), SETTLE_ERRORS).name).toBe('TypeError');
    expect(wireError(new TypeError('x'), PRODUCE_ERRORS).name).toBe('backend_unavailable');
    expect(wireError(new Error('ECONNRESET from 10.0.0.1'), PRODUCE_ERRORS)).toEqual({
      name: 'backend_unavailable',
      message: PRODUCE_ERRORS.backend_unavailable,
    });
  });
});

describe('MW-02: declared queue handler', () => {
  it('is an own data property holding a function on a plain object', () => {
    expect(declaredQueueHandler({ queue() {} })).toBeDefined();
    expect(declaredQueueHandler(Object.assign(Object.create(null), { queue() {} }))).toBeDefined();
    expect(declaredQueueHandler(Object.create({ queue() {} }))).toBeUndefined();
    expect(
      declaredQueueHandler({
        get queue() {
          return () => {};
        },
      }),
    ).toBeUndefined();
    expect(declaredQueueHandler({ queue: 1 })).toBeUndefined();
    expect(declaredQueueHandler([])).toBeUndefined();
    expect(declaredQueueHandler(new Proxy({ queue() {} }, {}))).toBeUndefined();
    expect(declaredQueueHandler(undefined)).toBeUndefined();
  });
});
