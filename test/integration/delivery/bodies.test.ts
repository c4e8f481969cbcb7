/**
 * DL-10 (and AQ-04's size bound): bodies arrive byte-identical to what was sent — binary safe, up
 * to 127000 bytes — and a body of 127001 bytes is refused at send with `message_too_large`.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { allEnded, outcomeOf, queueCounts, records, serial, sleep, waitDrained } from './delivery-kit.ts';

describe.concurrent('DL-10 message bodies', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('DL-10 127000-byte random binary bodies, every byte value, an empty body and UTF-8 text arrive byte-identical', async ({
    expect,
  }) => {
    const log = d.logFile('bodies');
    const { queue } = await serial(() => d.setup('bodies', recordingWorker(log), { maxBatchSize: 10 }));
    const bodies: Uint8Array[] = [
      randomBytes(127_000),
      randomBytes(127_000),
      randomBytes(127_000),
      Uint8Array.from({ length: 512 }, (_, i) => i % 256),
      new Uint8Array(0),
      new TextEncoder().encode('日本語のテキスト \u{1F419} \0 \r\n'),
    ];
    const expected = new Map<string, string>();
    for (const body of bodies) {
      expected.set(await d.host.producer.send(queue, body), Buffer.from(body).toString('base64'));
    }
    // The same bytes sent as a string (UTF-8) arrive as those bytes.
    const text = 'é'.repeat(63_500); // 127000 bytes of UTF-8
    expected.set(await d.host.producer.send(queue, text), Buffer.from(text, 'utf8').toString('base64'));
    await waitDrained(d, queue);
    const events = await waitFor('handlers ended', () => {
      const e = records(log);
      return allEnded(e) ? e : undefined;
    });
    const got = new Map(events.filter((e) => e.ev === 'msg').map((e) => [e.id as string, e.body as string]));
    expect(got.size).toBe(expected.size);
    for (const [id, body] of expected) expect(got.get(id) === body, `body of ${id}`).toBe(true);
  });

  it('DL-10 AQ-04 a 127001-byte body is refused at send with message_too_large, and nothing is enqueued', async ({
    expect,
  }) => {
    const queue = await serial(() => d.createQueue('team', 'too-large-q'));
    expect(await outcomeOf(d.host.producer.send(queue, randomBytes(127_001)))).toBe('message_too_large');
    expect(await outcomeOf(d.host.producer.send(queue, 'a'.repeat(127_001)))).toBe('message_too_large');
    expect(await outcomeOf(d.host.producer.send(queue, `${'é'.repeat(63_500)}a`))).toBe('message_too_large');
    // In a batch the whole send is refused (all or nothing).
    expect(
      await outcomeOf(
        d.host.producer.sendBatch(queue, [{ body: 'fine' }, { body: new Uint8Array(127_001) }]),
      ),
    ).toBe('message_too_large');
    await sleep(200);
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });
});
