import { describe, expect, it } from 'vitest';
import { COPY_SEND_TRIES, sendCopies } from '../../../lambdas/delivery/copy-sends.ts';
import type { EntryFailure, MessageQueue } from '../../../lambdas/delivery/ports.ts';

type Answer = EntryFailure[] | Error;

/** A queue whose n-th SendMessageBatch answers `answers[n]` (no failures past the list). */
function queue(answers: Answer[]) {
  const requests: string[][] = [];
  const messages: Pick<MessageQueue, 'sendBatch'> = {
    sendBatch: async (_url, entries, opts) => {
      expect(opts).toEqual({ atMostOnce: true });
      requests.push(entries.map((e) => e.body));
      const answer = answers[requests.length - 1] ?? [];
      if (answer instanceof Error) throw answer;
      return { failed: answer, queueIds: new Map(), resent: false };
    },
  };
  return { messages, requests };
}

const copy = (body: string) => ({ body, delaySeconds: 0 });
const what = { message: 'test request failed', fields: {} };

describe('sending copies at most once', () => {
  it('DL-07 sends again at once what SQS failed on its side, never what the request failed on', async () => {
    const q = queue([
      [
        { index: 1, senderFault: false, code: 'InternalError' },
        { index: 2, senderFault: true, code: 'InvalidParameterValue' },
      ],
    ]);
    const out = await sendCopies(q.messages, 'url', ['a', 'b', 'c'], copy, what);
    expect(q.requests).toEqual([['a', 'b', 'c'], ['b']]);
    expect(out).toEqual({ sent: ['a', 'b'], refused: ['c'], codes: ['InvalidParameterValue'] });
  });

  it('DL-07 gives up on a service failure after a few tries, and refuses a part whose request failed whole', async () => {
    const failing: EntryFailure[] = [{ index: 0, senderFault: false }];
    const q = queue([...Array.from({ length: COPY_SEND_TRIES }, () => failing)]);
    const out = await sendCopies(q.messages, 'url', ['a'], copy, what);
    expect(q.requests).toHaveLength(COPY_SEND_TRIES);
    expect(out).toEqual({ sent: [], refused: ['a'], codes: ['ServiceFault'] });

    // Eleven copies make two requests: the first fails whole (its answer may be lost, so none is
    // sent again), the second still goes.
    const items = Array.from({ length: 11 }, (_, i) => `m${i}`);
    const q2 = queue([new Error('connection reset')]);
    const out2 = await sendCopies(q2.messages, 'url', items, copy, what);
    expect(q2.requests.map((r) => r.length)).toEqual([10, 1]);
    expect(out2.refused).toEqual(items.slice(0, 10));
    expect(out2.sent).toEqual(['m10']);
  });
});
