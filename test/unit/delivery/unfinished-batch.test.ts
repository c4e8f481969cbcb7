import { describe, expect, it } from 'vitest';
import {
  BATCH_UNFINISHED,
  BatchUnfinishedError,
  unfinishedBatchOf,
} from '../../../lambdas/delivery/unfinished-batch.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';

const lambdaCause = (errorType: string, errorMessage: string) =>
  JSON.stringify({ errorType, errorMessage, trace: ['at x (file.js:1:1)'] });

describe('a runner’s report of a batch whose handler ended unfinished (RC-04)', () => {
  it('is read from Lambda’s JSON Cause or a plain message, with the batch and the handler’s outcome', () => {
    const err = new BatchUnfinishedError('b1.x2', 'returned', new Error('table away'));
    expect(err.name).toBe(BATCH_UNFINISHED);
    expect(unfinishedBatchOf({ Error: err.name, Cause: lambdaCause(err.name, err.message) })).toEqual({
      batchId: 'b1.x2',
      outcome: 'returned',
    });
    expect(unfinishedBatchOf({ Error: err.name, Cause: err.message })).toEqual({
      batchId: 'b1.x2',
      outcome: 'returned',
    });
    for (const outcome of ['threw', 'abandoned'] as const)
      expect(
        unfinishedBatchOf({
          Error: BATCH_UNFINISHED,
          Cause: new BatchUnfinishedError('b', outcome, 0).message,
        }),
      ).toEqual({
        batchId: 'b',
        outcome,
      });
  });

  it('says nothing for any other failure: a lost response or a timeout may leave a handler running', () => {
    const message = new BatchUnfinishedError('b1', 'returned', 0).message;
    for (const failure of [
      undefined,
      {},
      { Error: 'Lambda.ServiceException', Cause: message },
      { Error: 'States.Timeout' },
      { Error: 'Error', Cause: lambdaCause('Error', message) },
      { Error: BATCH_UNFINISHED },
      { Error: BATCH_UNFINISHED, Cause: 'batch b1 is unfinished (acknowledged): …' },
      { Error: BATCH_UNFINISHED, Cause: lambdaCause(BATCH_UNFINISHED, 'something else') },
      { Error: BATCH_UNFINISHED, Cause: '{"errorMessage": 7}' },
    ])
      expect(unfinishedBatchOf(failure)).toBeUndefined();
  });

  it('crosses the state machine: a Catch of the thrown error hands RecoverBatch what it needs', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Invoke',
      States: {
        Invoke: {
          Type: 'Task',
          Resource: 'arn:aws:states:::lambda:invoke',
          Parameters: { FunctionName: 'worker', 'Payload.$': '$' },
          Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'Recover' }],
          End: true,
        },
        Recover: {
          Type: 'Task',
          Resource: 'arn:aws:states:::lambda:invoke',
          Parameters: { FunctionName: 'step', Payload: { 'failure.$': '$.failure' } },
          ResultSelector: { 'value.$': '$.Payload' },
          End: true,
        },
      },
    });
    let seen: unknown;
    const execution = machine.start({
      name: 'unfinished-1',
      input: {},
      taskHandlers: {
        Invoke: async () => {
          throw new BatchUnfinishedError('bLane.s1', 'threw', new Error('ECONNREFUSED'));
        },
        Recover: async (payload) => {
          seen = unfinishedBatchOf((payload as { failure: { Error: string; Cause: string } }).failure);
          return {};
        },
      },
    });
    await execution.result;
    expect(seen).toEqual({ batchId: 'bLane.s1', outcome: 'threw' });
  });
});
