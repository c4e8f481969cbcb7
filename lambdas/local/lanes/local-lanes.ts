import { type BatchHostPort, type QueueInvoker, runLane } from '../../delivery/batch-runner.ts';
import {
  type ControlLoop,
  type DispatcherStepInput,
  type LaneInput,
  type LaneLauncher,
  type LaneState,
  roundCounted,
} from '../../delivery/control-loop.ts';
import type { Slot } from '../../delivery/delivery-service.ts';
import { DISPATCHER_TASKS, dispatcherDefinition } from '../../delivery/dispatcher-definition.ts';
import type { LaneKind } from '../../delivery/lane-kinds.ts';
import type { MessageQueue } from '../../delivery/ports.ts';
import { log } from '../../shared/log.ts';
import { withLambdaInvokeFaults } from '../faults/invoke-faults.ts';
import { type LambdaConcurrency, lambdaConcurrencyFromEnv } from '../physics/lambda-concurrency.ts';
import { type StartExecutionBudget, startExecutionBudgetFromEnv } from '../physics/start-execution-budget.ts';
import { type LocalExecution, LocalStateMachine } from '../standins/local-step-functions.ts';
import { LambdaCutOff } from './lambda-cut-off.ts';

export interface LocalLanesOptions {
  /** The control loop the state machine's Host tasks call (as the step Lambda does on AWS). */
  loop: Pick<ControlLoop, 'step'>;
  /** The runner's view of the Host (as the batch-host Lambda is on AWS). */
  host: BatchHostPort;
  messages: MessageQueue;
  /**
   * Makes the invoker that runs a slot's batch on the worker's code. With `onCutOff`, a handler
   * cut off at its time bound is handed over still running (lambda-cut-off.ts).
   */
  invokerFor(slot: Slot, onCutOff?: LambdaCutOff['hold']): Promise<QueueInvoker>;
  /** Whether a cut-off handler runs on until its invocation ends, as on Lambda (lambda-cut-off.ts). */
  lambdaCutOff?: boolean;
  /** How long a lane long-polls an empty queue before it ends. */
  idleWaitSeconds: number;
  /** Wait state durations in ms (tests shorten the wait for a kept slot). */
  waitTimeOverrides?: Record<string, number>;
  /** Step Functions' history cap (default 25,000, as on AWS). */
  historyLimit?: number;
  /** Lambda's concurrency pool the Task invocations share (default: TAKOFORM_PHYSICS's, if set). */
  concurrency?: LambdaConcurrency;
  /** Step Functions' StartExecution quota the lane starts share (default: TAKOFORM_PHYSICS's, if set). */
  startBudget?: StartExecutionBudget;
}

/**
 * The local Host's lanes: each one an execution of the production dispatcher definition, run in
 * process by the local Step Functions stand-in, with the Task states calling what the Lambda
 * functions call on AWS. Which lanes start, and when, is the control loop's decision alone.
 */
export class LocalLanes implements LaneLauncher {
  private o: LocalLanesOptions | undefined;
  /**
   * The Task handlers, made once: each execution calls the same functions, as every execution
   * on AWS invokes the same Lambda functions, so their injected faults draw from one schedule
   * (made per execution, every lane would meet the same first draw).
   */
  private handlers: Record<string, (payload: unknown) => Promise<unknown>> | undefined;
  /** One state machine per kind of lane, as on AWS (the same two definitions). */
  private readonly machines: Record<LaneKind, LocalStateMachine>;
  private stopped = false;
  /** Aborted by `stop`: lanes stop receiving and start no new batch. */
  private readonly stopping = new AbortController();

  constructor(opts: { historyLimit?: number } = {}) {
    const arns = { stepFunction: 'arn:aws:lambda:local:000000000000:function:dispatcher-step' };
    const limits = opts.historyLimit !== undefined ? { historyLimit: opts.historyLimit } : {};
    // The stand-in ends an execution at its definition's TimeoutSeconds: 300 s for Express.
    this.machines = {
      standard: new LocalStateMachine(dispatcherDefinition(arns, 'standard'), limits),
      express: new LocalStateMachine(dispatcherDefinition(arns, 'express'), limits),
    };
  }

  /** Connects the lanes to the Host they run for (the loop needs the launcher, and back). */
  attach(opts: LocalLanesOptions): void {
    this.o = opts;
    this.handlers = this.taskHandlers(opts);
  }

  async start(name: string, input: LaneInput, kind: LaneKind = 'standard'): Promise<'started' | 'exists'> {
    const o = this.o;
    if (!o || !this.handlers || this.stopped) return 'exists';
    const handlers = this.handlers;
    const start = () =>
      this.machines[kind].start({
        name,
        input,
        taskHandlers: handlers,
        ...(o.waitTimeOverrides ? { waitTimeOverrides: o.waitTimeOverrides } : {}),
      });
    const budget = o.startBudget ?? startExecutionBudgetFromEnv();
    let execution: LocalExecution;
    try {
      execution = budget ? await budget.startWithSdkRetries(kind, start) : start();
    } catch (err) {
      if ((err as Error)?.name === 'ExecutionAlreadyExists') return 'exists';
      throw err;
    }
    execution.result.catch((err) => {
      if (!this.stopped) log.warn('a dispatcher lane failed', { name, err });
    });
    return 'started';
  }

  /**
   * The Lambda functions behind the Task states. With `TAKOFORM_FAULTS` (`localInvoke`) their
   * invocations throttle, fail or hang as Lambda's do, so the state machine's Retry and Catch run.
   * With `TAKOFORM_PHYSICS` they share Lambda's concurrency pool and are refused past it.
   */
  private taskHandlers(o: LocalLanesOptions): Record<string, (payload: unknown) => Promise<unknown>> {
    const pool = o.concurrency ?? lambdaConcurrencyFromEnv();
    const limited = <P, T>(fn: (p: P) => Promise<T>, label: 'step' | 'worker') =>
      pool ? pool.wrap(fn, label) : fn;
    const step = limited(
      withLambdaInvokeFaults(async (payload: unknown) => o.loop.step(payload as DispatcherStepInput), 'step'),
      'step',
    );
    return {
      [DISPATCHER_TASKS.acquire]: async (payload) =>
        this.stopped
          ? { status: 'stop', lane: roundCounted((payload as { lane: LaneState }).lane) }
          : step(payload),
      [DISPATCHER_TASKS.recover]: step,
      [DISPATCHER_TASKS.handover]: async (payload) => (this.stopped ? { handedOver: false } : step(payload)),
      [DISPATCHER_TASKS.invoke]: limited(
        withLambdaInvokeFaults(async (payload: unknown) => {
          const { slot, laneUntil } = payload as { slot: Slot; laneUntil?: number };
          const cutOff = o.lambdaCutOff ? new LambdaCutOff() : undefined;
          // Several batches per InvokeWorker, as on AWS: the state machine's transitions are
          // paid per invocation, not per batch.
          const run = runLane(
            slot,
            {
              messages: o.messages,
              host: cutOff ? cutOff.host(o.host) : o.host,
              invoker: await o.invokerFor(slot, cutOff?.hold),
              idleWaitSeconds: o.idleWaitSeconds,
              signal: this.stopping.signal,
              log: (message, fields) => log.warn(message, { consumerUid: slot.consumerUid, ...fields }),
            },
            { maxBatches: 100, budgetMs: 30_000, ...(laneUntil !== undefined ? { until: laneUntil } : {}) },
          );
          return cutOff ? cutOff.ending(run) : run;
        }, 'worker'),
        'worker',
      ),
    };
  }

  /** Executions still running, with their history so far (tests and diagnostics). */
  running() {
    return [...this.machines.standard.running(), ...this.machines.express.running()];
  }

  /** Both machines' counts together; `byKind` for each. */
  stats() {
    const a = this.machines.standard.stats();
    const b = this.machines.express.stats();
    return {
      started: a.started + b.started,
      failed: a.failed + b.failed,
      maxHistoryEvents: Math.max(a.maxHistoryEvents, b.maxHistoryEvents),
      transitions: a.transitions + b.transitions,
      byKind: { standard: a, express: b },
    };
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
    this.stopping.abort();
    const all = this.running();
    const within = async (ms: number) => {
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms).unref());
      const settled = Promise.allSettled(all.map((r) => r.result)).then(() => 'done' as const);
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
