/**
 * One logger (OPS-04): core code writes through `log` (shared/log.ts); on AWS its lines become
 * Powertools Logger lines, with the invocation's context and the keys a handler scoped, and
 * errors reduced to name and code (SEC-01) whichever sink writes them.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { powertoolsSink } from '../../../lambdas/composition/powertools-log.ts';
import { type LogSink, log, setLogSink, stderrSink } from '../../../lambdas/shared/log.ts';

const CONTEXT = {
  functionName: 'takoform-batch-host',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:takoform-batch-host',
  memoryLimitInMB: '1024',
  awsRequestId: 'req-1',
  logGroupName: '/aws/lambda/takoform-batch-host',
  logStreamName: 's',
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 1_000,
  done: () => {},
  fail: () => {},
  succeed: () => {},
};

function captured(stream: NodeJS.WriteStream) {
  const lines: string[] = [];
  const spy = vi.spyOn(stream, 'write').mockImplementation((chunk: unknown) => {
    lines.push(String(chunk));
    return true;
  });
  return { lines, restore: () => spy.mockRestore() };
}

let previous: LogSink | undefined;
afterEach(() => {
  if (previous) setLogSink(previous);
  previous = undefined;
});

describe('the Host logger', () => {
  it('OPS-04 a core line on AWS is a Powertools line: request id, cold start, service, scoped keys', async () => {
    const logger = new Logger({ serviceName: 'takoform-batch-host' });
    logger.addContext(CONTEXT);
    previous = setLogSink(powertoolsSink(logger));
    const out = captured(process.stdout);
    try {
      await log.withKeys({ consumerUid: 'rC', batchId: 'bB' }, async () => {
        await Promise.resolve();
        log.info('message retried', { messageId: 'm1', attempts: 2 });
      });
      log.info('outside', {});
    } finally {
      out.restore();
    }
    const [inside, outside] = out.lines.map((l) => JSON.parse(l));
    expect(inside).toMatchObject({
      level: 'INFO',
      message: 'message retried',
      service: 'takoform-batch-host',
      function_request_id: 'req-1',
      cold_start: expect.any(Boolean),
      consumerUid: 'rC',
      batchId: 'bB',
      messageId: 'm1',
      attempts: 2,
    });
    expect(outside).not.toHaveProperty('batchId');
  });

  it('SEC-01 an error field is reduced to its name and code by every sink: its message never reaches a line', () => {
    const secret = 'tfk_do-not-log-me';
    const err = Object.assign(new Error(`bad key ${secret}`), { code: 'E1' });
    const logger = new Logger({ serviceName: 'takoform-api' });
    previous = setLogSink(powertoolsSink(logger));
    const out = captured(process.stdout);
    const errOut = captured(process.stderr);
    try {
      log.warn('refused', { err });
      setLogSink(stderrSink);
      log.warn('refused', { err });
    } finally {
      out.restore();
      errOut.restore();
    }
    const all = [...out.lines, ...errOut.lines];
    expect(all).toHaveLength(2);
    for (const line of all) {
      expect(line).not.toContain(secret);
      expect(JSON.parse(line).err).toEqual({ name: 'Error', code: 'E1' });
    }
  });
});
