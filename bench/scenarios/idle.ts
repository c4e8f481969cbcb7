/**
 * What an idle consumer costs. On AWS nothing of a consumer runs while its queue is empty except
 * the supervisor's round every minute (lambdas/entries/supervisor.ts): it lists active
 * consumers, and per consumer recovers expired batches, reads the attachment, queue and slot map
 * and asks SQS for the queue's depth; it starts a lane only when messages are visible and no lane
 * receives. This scenario runs that very function (`superviseOnce`) against the stand-ins: its
 * DynamoDB and SQS calls are real and counted by the SDK middleware; CloudWatch is not emulated,
 * so its calls are counted by a recording stub. Each round is
 * given the clock of the next minute, so work the supervisor does only every few minutes (the
 * oldest-message-age query) is counted at its real rate.
 *
 * It also measures how a lane ends on an empty queue: one lane execution from its start to its
 * end, with whatever it does on the way (counted, not assumed). That happens once per lane per
 * burst, not per minute.
 */

import { type SupervisorDeps, superviseOnce } from '../../lambdas/composition/aws-supervisor.ts';
import { dispatcherInput } from '../../lambdas/delivery/dispatcher-definition.ts';
import { type BenchHost, createBenchHost } from '../support/bench-host.ts';
import { supervisorLogBytes } from '../support/log-meter.ts';
import { attribute, currentContext, Meter, type Tally } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { until } from '../support/stats.ts';
import { NOOP_WORKER } from '../support/workers.ts';

export interface SupervisorSample {
  rounds: number;
  /** All rounds with one idle consumer. */
  oneConsumer: Tally;
  /** All rounds with two idle consumers (the difference is what one more consumer adds). */
  twoConsumers: Tally;
  roundMs: number[];
}

/** A stand-in client that answers like an idle account and counts each call. */
export function recordingStub(meter: Meter, service: string, answer: (operation: string) => unknown) {
  return {
    send: async (command: object) => {
      const operation = command.constructor.name.replace(/Command$/, '');
      meter.sdkCall(service, operation, currentContext(), {}, undefined);
      return answer(operation);
    },
  };
}

/** The supervisor's dependencies over a bench Host; `clock` moves rounds to later minutes. */
export function supervisorDeps(bench: BenchHost, meter: Meter, clock?: () => number): SupervisorDeps {
  return {
    host: {
      host: bench.host,
      clients: { dynamodb: bench.dynamodb, sqs: bench.sqs },
      config: { queueNamePrefix: bench.queueNamePrefix },
    },
    cloudwatch: recordingStub(meter, 'CloudWatch', () => ({
      MetricDataResults: [{ Id: 'oldest', Values: [] }],
    })),
    ...(clock ? { clock } : {}),
  } as unknown as SupervisorDeps;
}

export async function supervisorRun(endpoints: Endpoints, o: { rounds: number }): Promise<SupervisorSample> {
  const meter = new Meter();
  const bench = await createBenchHost(endpoints, { meter });
  try {
    const settings = { maxBatchSize: 10, maxBatchTimeoutSeconds: 1, maxConcurrency: 10 };
    let simulatedNow = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    await bench.setupConsumer('idle-a', NOOP_WORKER, settings);
    // Round i runs "at" minute i, so work the supervisor does only every few minutes is
    // counted at its real rate.
    const deps = supervisorDeps(bench, meter, () => simulatedNow);
    const roundMs: number[] = [];
    const rounds = async () => {
      for (let i = 0; i < o.rounds; i++) {
        simulatedNow += 60_000;
        const t0 = performance.now();
        const r = await attribute('supervisor', () => superviseOnce(deps), meter);
        const ms = performance.now() - t0;
        meter.lambda('supervisor', ms);
        meter.logged('supervisor', supervisorLogBytes(r));
        roundMs.push(ms);
        if (r.started > 0) throw new Error('the supervisor started an execution for an empty queue');
      }
    };
    meter.reset();
    await rounds();
    const oneConsumer = meter.reset();
    await bench.setupConsumer('idle-b', NOOP_WORKER, settings);
    meter.reset();
    await rounds();
    const twoConsumers = meter.reset();
    return { rounds: o.rounds, oneConsumer, twoConsumers, roundMs };
  } finally {
    await bench.close();
  }
}

export interface LaneEndSample {
  ok: boolean;
  idleWaitSeconds: number;
  seconds: number;
  tally: Tally;
}

/** One dispatcher execution with one lane on an empty queue, from start to its end. */
export async function laneEndRun(
  endpoints: Endpoints,
  o: { idleWaitSeconds: number; timeoutMs: number },
): Promise<LaneEndSample> {
  const meter = new Meter();
  const bench = await createBenchHost(endpoints, { meter, idleWaitSeconds: o.idleWaitSeconds });
  try {
    const { consumerUid } = await bench.setupConsumer('lane-end', NOOP_WORKER, {
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 1,
      maxConcurrency: 1,
    });
    const active = await attribute('setup', () => bench.host.attachments.listActive());
    const generation = active.find((a) => a.consumerUid === consumerUid)?.generation;
    if (generation === undefined) throw new Error('the consumer is not attached');
    // The supervisor finds an empty queue and starts nothing; the one lane starts as a send's
    // wake starts it (a lane of its own name), and this measures it to its end.
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: o.idleWaitSeconds, supervisorMs: 600_000 });
    meter.reset();
    const t0 = performance.now();
    await dispatcher.start(`lane-end-${consumerUid}`, dispatcherInput(consumerUid, generation));
    const ok = await until(() => (meter.snapshot().transitions.LaneDone ?? 0) >= 1, o.timeoutMs, 10);
    const seconds = (performance.now() - t0) / 1000;
    await dispatcher.stop(5_000);
    const tally = meter.reset();
    return { ok, idleWaitSeconds: o.idleWaitSeconds, seconds, tally };
  } finally {
    await bench.close();
  }
}
