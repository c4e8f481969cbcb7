import type { SQSClient } from '@aws-sdk/client-sqs';
import { StateMachine } from 'aws-local-stepfunctions';
import type { DynamoAttachments } from '../../adapters/aws/dynamodb-attachments.ts';
import { type QueueInvoker, runLane } from '../../delivery/batch-runner.ts';
import type { DeliveryService, Slot } from '../../delivery/delivery-service.ts';
import { directBatchHost } from '../../delivery/direct-batch-host.ts';
import {
  DISPATCHER_TASKS,
  type DispatcherStepInput,
  dispatcherDefinition,
  dispatcherInput,
} from '../../delivery/dispatcher-definition.ts';
import { dispatcherStep } from '../../delivery/dispatcher-steps.ts';
import { log } from '../../shared/log.ts';

export interface LocalDispatcherOptions {
  service: DeliveryService;
  attachments: DynamoAttachments;
  sqs: SQSClient;
  /** Makes the invoker that runs a slot's batch on the worker's code. */
  invokerFor(slot: Slot): Promise<QueueInvoker>;
  /** How long a lane long-polls an empty queue before it rests. */
  idleWaitSeconds?: number;
  /** How often attachments are checked for executions to start. */
  pollMs?: number;
}

interface Running {
  generation: number;
  abort: () => void;
  done: Promise<void>;
}

/** Lambda-invoke results have this shape; the ASL reads `$.Payload`. */
const asLambdaResult = (payload: unknown) => ({
  Payload: JSON.parse(JSON.stringify(payload)),
  StatusCode: 200,
});

/**
 * Runs the production dispatcher definition under aws-local-stepfunctions: one execution per
 * active consumer generation, restarted when it ends while the consumer is still attached. The
 * Task states call the same functions the Lambda handlers call on AWS.
 */
export class LocalDispatcher {
  private readonly o: Required<LocalDispatcherOptions>;
  private readonly machine = new StateMachine(
    dispatcherDefinition({
      stepFunction: 'arn:aws:lambda:local:000000000000:function:dispatcher-step',
    }) as never,
    {
      validationOptions: { checkArn: false },
    },
  );
  private readonly running = new Map<string, Running>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Aborted by `stop`: lanes stop receiving and start no new batch. */
  private readonly stopping = new AbortController();
  private ticking: Promise<void> | undefined;

  constructor(opts: LocalDispatcherOptions) {
    this.o = { idleWaitSeconds: 10, pollMs: 500, ...opts };
  }

  start(): void {
    const tick = async () => {
      if (this.stopped) return;
      this.ticking = this.reconcile().catch((err) => log.warn('dispatcher check failed; retrying', { err }));
      await this.ticking;
      if (!this.stopped) this.timer = setTimeout(tick, this.o.pollMs);
    };
    void tick();
  }

  /** Starts an execution for every active consumer generation that has none. */
  private async reconcile(): Promise<void> {
    const active = await this.o.attachments.listActive();
    log.debug('dispatcher check', { active: active.length, running: this.running.size });
    for (const a of active) {
      const current = this.running.get(a.consumerUid);
      if (current && current.generation === a.generation) continue;
      if (current) continue; // the old generation's lanes stop by themselves at their next slot
      this.launch(a.consumerUid, a.generation, a.maxConcurrency);
    }
  }

  private launch(consumerUid: string, generation: number, lanes: number): void {
    log.debug('dispatcher execution starts', { consumerUid, generation, lanes });
    const host = directBatchHost(this.o.service);
    const execution = this.machine.run(dispatcherInput(consumerUid, generation, lanes), {
      noThrowOnAbort: true,
      overrides: {
        taskResourceLocalHandlers: {
          [DISPATCHER_TASKS.acquire]: async (input) =>
            asLambdaResult(
              this.stopped
                ? { status: 'stop' }
                : await dispatcherStep(
                    this.o.service,
                    (input as unknown as { Payload: DispatcherStepInput }).Payload,
                  ),
            ),
          [DISPATCHER_TASKS.recover]: async (input) =>
            asLambdaResult(
              await dispatcherStep(
                this.o.service,
                (input as unknown as { Payload: DispatcherStepInput }).Payload,
              ),
            ),
          [DISPATCHER_TASKS.invoke]: async (input) => {
            const slot = (input as unknown as { Payload: { slot: Slot } }).Payload.slot;
            // Several batches per InvokeWorker, as on AWS: the state machine's transitions are
            // paid per invocation, not per batch.
            const result = await runLane(
              slot,
              {
                sqs: this.o.sqs,
                host,
                invoker: await this.o.invokerFor(slot),
                idleWaitSeconds: this.o.idleWaitSeconds,
                signal: this.stopping.signal,
                log: (message, fields) => log.warn(message, { consumerUid, ...fields }),
              },
              { maxBatches: 100, budgetMs: 30_000 },
            );
            return asLambdaResult(result);
          },
        },
        waitTimeOverrides: { WaitForSlot: 200 },
      },
    });
    const done = execution.result
      .then(
        () => undefined,
        (err) => log.warn('dispatcher execution failed; it will be restarted', { consumerUid, err }),
      )
      .finally(() => {
        if (this.running.get(consumerUid)?.done === done) this.running.delete(consumerUid);
      });
    this.running.set(consumerUid, { generation, abort: execution.abort, done });
  }

  /**
   * Stops starting work: lanes stop receiving and take no new batch, and running batches get
   * `boundMs` to finish. Then `cutOff` (ending the handlers still running, so that their runners
   * finalise them as abandoned: retried, never acknowledged) and a short wait for those runners;
   * executions still running after that are aborted. What is left unfinished is recovered when
   * the Host starts again.
   */
  async stop(boundMs = 10_000, cutOff?: () => Promise<void>): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    this.stopping.abort();
    const all = [...this.running.values()];
    const within = async (ms: number) => {
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms).unref());
      const settled = Promise.all(all.map((r) => r.done)).then(() => 'done' as const);
      return (await Promise.race([settled, timeout])) === 'done';
    };
    if (await within(boundMs)) return;
    if (cutOff) {
      await cutOff();
      if (await within(FINALIZE_AFTER_CUT_OFF_MS)) return;
    }
    for (const r of all) r.abort();
  }
}

/** Time the runners of cut-off handlers get to finalise their batches during a stop. */
const FINALIZE_AFTER_CUT_OFF_MS = 3_000;
