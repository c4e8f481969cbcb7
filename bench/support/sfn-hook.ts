/**
 * Watches the dispatcher executions the local Host runs under aws-local-stepfunctions, without
 * touching the Host's code: `StateMachine.prototype.run` is wrapped once in this process so that
 *
 * - every `StateEntered` (and `StateRetried`) event of a root execution counts one state
 *   transition for the consumer named in the execution input (Step Functions Standard bills per
 *   transition, retries included), read as the events pass to the stand-in that consumes them;
 *   an execution of the Express dispatcher counts as one Express request with its duration
 *   (from its start to the end of its events), which is how Express bills instead;
 * - every Task handler (AcquireSlot, InvokeWorker, RecoverBatch: a Lambda invoke on AWS) counts one
 *   Lambda invocation with its measured duration and the log lines its function would write, and
 *   the SDK calls made inside it are attributed to that Task.
 *
 * Map iterations are nested `run` calls that receive the same (already wrapped) overrides; their
 * events reach the root execution's event log, so only root executions (lane inputs: `round`) are
 * read, and handlers are wrapped once.
 */
import { StateMachine } from 'aws-local-stepfunctions';
import { EXPRESS_MAX_MS } from '../../lambdas/delivery/lane-kinds.ts';
import { taskLogBytes } from './log-meter.ts';
import { attribute, type Meter } from './meter.ts';

const consumers = new Map<string, Meter>();
const WRAPPED = Symbol('bench-wrapped');

/** Counts the executions of this consumer into `meter`. */
export function watchConsumer(consumerUid: string, meter: Meter): void {
  consumers.set(consumerUid, meter);
}

export function unwatchConsumer(consumerUid: string): void {
  consumers.delete(consumerUid);
}

/** Lambda function roles of the dispatcher's Task states. */
const TASK_ROLES: Record<string, string> = {
  AcquireSlot: 'step:AcquireSlot',
  RecoverBatch: 'step:RecoverBatch',
  HandOver: 'step:HandOver',
  InvokeWorker: 'worker:InvokeWorker',
};

type Handler = ((input: unknown) => unknown) & { [WRAPPED]?: true };
type RunOptions = { overrides?: { taskResourceLocalHandlers?: Record<string, Handler> } } & Record<
  string,
  unknown
>;

let installed = false;

export function installStepFunctionsHook(): void {
  if (installed) return;
  installed = true;
  const proto = StateMachine.prototype as unknown as {
    run(
      input: unknown,
      options?: RunOptions,
    ): { eventLogs: AsyncGenerator<{ type: string; state?: { name: string } }> };
  };
  const original = proto.run;
  proto.run = function run(this: unknown, input: unknown, options?: RunOptions) {
    const consumerUid = (input as { consumerUid?: unknown } | null)?.consumerUid;
    const meter = typeof consumerUid === 'string' ? consumers.get(consumerUid) : undefined;
    let opts = options;
    const handlers = options?.overrides?.taskResourceLocalHandlers;
    if (meter && handlers && !Object.values(handlers).every((h) => h[WRAPPED])) {
      const wrapped: Record<string, Handler> = {};
      for (const [name, h] of Object.entries(handlers)) {
        if (h[WRAPPED]) {
          wrapped[name] = h;
          continue;
        }
        const role = TASK_ROLES[name] ?? `task:${name}`;
        const w: Handler = async (taskInput: unknown) => {
          const t0 = performance.now();
          const span = meter.lambdaStarted(role);
          try {
            const result = await attribute(role, () => h(taskInput), meter);
            meter.logged(role, taskLogBytes(role, taskInput, result));
            return result;
          } finally {
            meter.lambdaEnded(role, performance.now() - t0, span);
          }
        };
        w[WRAPPED] = true;
        wrapped[name] = w;
      }
      opts = { ...options, overrides: { ...options?.overrides, taskResourceLocalHandlers: wrapped } };
    }
    const execution = original.call(this, input, opts);
    const isRoot = typeof (input as { round?: unknown } | null)?.round === 'number';
    if (meter && isRoot) {
      // The Express dispatcher is the one with Express's five-minute timeout (lane-kinds.ts).
      const express =
        (this as { definition?: { TimeoutSeconds?: number } }).definition?.TimeoutSeconds ===
        EXPRESS_MAX_MS / 1000;
      const span = meter.executionStarted(express);
      const t0 = performance.now();
      // The local stand-in reads the event stream itself (history limit, its own counts), and an
      // async generator gives each event to one reader only: count the events as they pass. The
      // stream ends with the execution, which is when an Express one's billed duration ends.
      const source = execution.eventLogs;
      execution.eventLogs = (async function* () {
        try {
          for await (const event of source) {
            if ((event.type === 'StateEntered' || event.type === 'StateRetried') && event.state) {
              meter.transition(
                event.type === 'StateRetried' ? `${event.state.name} (retry)` : event.state.name,
                express,
              );
            }
            yield event;
          }
        } finally {
          if (express) meter.expressEnded(performance.now() - t0, span);
        }
      })();
    }
    return execution;
  };
}
