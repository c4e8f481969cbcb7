/**
 * A local Step Functions (Standard) stand-in that enforces what AWS enforces and
 * aws-local-stepfunctions@3 does not: the 25,000-event execution history, StartExecution's name
 * rules, and AWS's (absent) default Task timeout. It also counts state transitions, what AWS bills.
 *
 * What the library does, checked with probes against 3.0.0:
 * - `Retry`/`Catch` match on the thrown Error's `name`: a handler throwing an Error named
 *   `Lambda.TooManyRequestsException` is retried by `ErrorEquals: ['Lambda.TooManyRequestsException']`.
 * - Task `TimeoutSeconds` is enforced for local handlers too (`States.Timeout`, not matched by
 *   `States.TaskFailed`), but the handler is not cancelled: it runs on, as a Lambda does on AWS.
 *   Without `TimeoutSeconds` the library imposes 60 s (the States Language spec's default); AWS
 *   imposes none, so Task states without one get the longest timer Node can set (~24.8 days).
 * - eventLogs emit ExecutionStarted; per state StateEntered, then StateExited — or StateFailed
 *   (then StateRetried before each retry, StateCaught when caught, and StateExited after a catch;
 *   an uncaught failure has no StateExited); per Map iteration MapIterationStarted and
 *   MapIterationSucceeded/Failed, its states' events carrying the iteration `index`; per Parallel
 *   branch ParallelBranchStarted/Succeeded/Failed; last ExecutionSucceeded/Failed/Aborted/Timeout.
 *   Events reach the stream a little after they happen (nested ones later still), and events a
 *   Map iteration forwards after the execution closed are lost.
 *
 * History, counted as AWS Standard records it (an approximation):
 * - the execution: ExecutionStarted 1, its closing event 1;
 * - a Task: TaskStateEntered, TaskScheduled, TaskStarted, TaskSucceeded, TaskStateExited (5), plus
 *   TaskFailed, TaskScheduled, TaskStarted (3) per retry; a caught failure has TaskFailed instead
 *   of TaskSucceeded, an uncaught one no TaskStateExited;
 * - Choice, Pass, Wait, Succeed: Entered and Exited (2); Fail: Entered (the execution's failure
 *   follows);
 * - Map and Parallel: Entered, Started, Succeeded, Exited (4); a Map iteration Started and
 *   Succeeded/Failed (2); AWS's MapIterationAborted for iterations stopped by a failing one is
 *   not counted, nor a Parallel branch (AWS records no events of its own for one).
 * An execution whose count passes `historyLimit` is aborted and its result rejects with
 * `HistoryLimitExceeded`, as AWS fails such an execution. `transitions` counts state entries and
 * retries (AWS bills each).
 *
 * Execution names follow StartExecution: a name is reused idempotently only by a running
 * execution with the same input (compared as JSON text); any other reuse is
 * `ExecutionAlreadyExists`. AWS remembers names for 90 days after close; this process remembers
 * them for 10 minutes, then forgets them (enough to catch a restart loop reusing a name, without
 * an unbounded map).
 */

import { StateMachine } from 'aws-local-stepfunctions';

/** A Task state's local stand-in for the Lambda it invokes. */
export type TaskHandler = (payload: unknown, call: { functionName?: string }) => Promise<unknown>;

export interface LocalExecutionOptions {
  /** Execution name, as AWS allows: 1..80 characters of [A-Za-z0-9-_]. */
  name: string;
  input: unknown;
  /**
   * By Task state name. A `lambda:invoke` Task's handler gets the state's resolved
   * `Parameters.Payload` (and the function it names) and returns the Lambda's payload (see
   * `asTaskHandler`).
   */
  taskHandlers: Record<string, TaskHandler>;
  /** Milliseconds, by Wait state name. */
  waitTimeOverrides?: Record<string, number>;
  /** Milliseconds between retries, by state name (tests shorten AWS's backoff; a clock). */
  retryIntervalOverrides?: Record<string, number>;
}

export interface LocalExecution {
  name: string;
  /**
   * The output. Rejects with an Error whose `name` is the ASL error (`States.Timeout`,
   * `HistoryLimitExceeded`, or what a Task threw); resolves to null after `abort()`.
   */
  result: Promise<unknown>;
  abort(): void;
  history(): { events: number; transitions: number };
}

export const DEFAULT_HISTORY_LIMIT = 25_000;
/** How long a closed execution's name stays taken here (AWS: 90 days). */
export const CLOSED_NAME_RETENTION_MS = 10 * 60_000;
const LAMBDA_INVOKE = 'arn:aws:states:::lambda:invoke';
/** setTimeout's largest delay; a longer one fires at once. */
const LONGEST_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);
const VALID_NAME = /^[A-Za-z0-9_-]{1,80}$/;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type StateDef = Record<string, unknown> & { Type?: string };
interface Definition {
  States?: Record<string, StateDef>;
}
interface LoggedEvent {
  type: string;
  state?: { name: string; type: string };
}

const named = (name: string, message: string, cause?: unknown): Error => {
  const err = new Error(message, cause === undefined ? undefined : { cause });
  err.name = name;
  return err;
};

/** JSON-cloned, as a Lambda payload crosses the wire; what JSON cannot hold arrives as null. */
const overTheWire = (value: unknown): Json => {
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as Json);
};

/** Every state of a definition, nested Map and Parallel states included. */
function* statesOf(def: Definition): Generator<[string, StateDef]> {
  for (const [name, state] of Object.entries(def.States ?? {})) {
    yield [name, state];
    for (const nested of [state.ItemProcessor, state.Iterator, ...((state.Branches as unknown[]) ?? [])])
      if (nested) yield* statesOf(nested as Definition);
  }
}

/**
 * A copy of `definition` whose Task states without a timeout get AWS's: none (see above). A
 * `ResultPath` of `$` is dropped: on AWS it is the default (the result replaces the state), while
 * aws-local-stepfunctions 3.0.0 writes the result under a key named `$` instead.
 */
export function withAwsTaskTimeouts(definition: object): Definition {
  const copy = structuredClone(definition) as Definition;
  for (const [, state] of statesOf(copy)) {
    if (state.Type === 'Task' && state.TimeoutSeconds === undefined && state.TimeoutSecondsPath === undefined)
      state.TimeoutSeconds = LONGEST_TIMER_SECONDS;
    if (state.ResultPath === '$') delete state.ResultPath;
  }
  return copy;
}

/**
 * What the library calls for a Task: a `lambda:invoke` Task gets what the Lambda returned as the
 * integration's `{Payload, StatusCode}`; a Task naming a function ARN gets the payload itself.
 */
function asTaskHandler(resource: unknown, handler: TaskHandler) {
  const invoke = typeof resource === 'string' && resource.startsWith(LAMBDA_INVOKE);
  return async (input: Json): Promise<Json> => {
    let returned: unknown;
    try {
      const call = invoke ? (input as { Payload?: unknown; FunctionName?: unknown } | null) : undefined;
      returned = await handler(
        invoke ? call?.Payload : input,
        typeof call?.FunctionName === 'string' ? { functionName: call.FunctionName } : {},
      );
    } catch (err) {
      // Retry and Catch match on `name`; a thrown non-Error would have none.
      const e = err instanceof Error ? err : named('Error', String(err));
      // A function's own error reaches the state machine as Lambda reports it: the Cause is
      // the JSON of {errorType, errorMessage, trace}. Lambda's and Step Functions' own errors
      // keep their text.
      if (!invoke || /^(Lambda|States|Sandbox)\./.test(e.name)) throw e;
      throw named(e.name, JSON.stringify({ errorType: e.name, errorMessage: e.message, trace: [] }), e);
    }
    return invoke ? { Payload: overTheWire(returned), StatusCode: 200 } : overTheWire(returned);
  };
}

/** History events (AWS's count) and transitions that one library event stands for; see above. */
export function historyCost(event: LoggedEvent): { events: number; transitions: number } {
  const type = event.state?.type;
  const compound = type === 'Map' || type === 'Parallel';
  switch (event.type) {
    case 'ExecutionStarted':
    case 'ExecutionSucceeded':
    case 'ExecutionFailed':
    case 'ExecutionAborted':
    case 'ExecutionTimeout':
    case 'MapIterationStarted':
    case 'MapIterationSucceeded':
    case 'MapIterationFailed':
      return { events: 1, transitions: 0 };
    case 'StateEntered':
      return { events: type === 'Task' ? 3 : compound ? 2 : 1, transitions: 1 };
    case 'StateExited':
      return { events: type === 'Task' || compound ? 2 : 1, transitions: 0 };
    case 'StateFailed':
      return { events: type === 'Task' || compound ? 1 : 0, transitions: 0 };
    case 'StateRetried':
      return { events: type === 'Task' ? 2 : 1, transitions: 1 };
    case 'StateCaught':
      // The failure was counted by StateFailed; the StateExited that follows counts a success
      // event that a caught state does not have.
      return { events: -1, transitions: 0 };
    default:
      return { events: 0, transitions: 0 };
  }
}

interface Entry {
  execution: LocalExecution;
  inputJson: string;
  closedAt?: number;
}

/** Definitions (as prepared, in JSON) that passed the library's validation in this process. */
const VALIDATED = new Set<string>();

export class LocalStateMachine {
  private readonly machine: StateMachine;
  private readonly tasks: Map<string, unknown>;
  private readonly historyLimit: number;
  private readonly names = new Map<string, Entry>();
  private readonly totals = { started: 0, failed: 0, maxHistoryEvents: 0, transitions: 0 };

  constructor(definition: object, opts: { historyLimit?: number } = {}) {
    const prepared = withAwsTaskTimeouts(definition);
    this.tasks = new Map(
      [...statesOf(prepared)].filter(([, s]) => s.Type === 'Task').map(([name, s]) => [name, s.Resource]),
    );
    this.historyLimit = opts.historyLimit ?? DEFAULT_HISTORY_LIMIT;
    // Validating a definition (the library compiles JSON schemas for it) takes 50–150 ms of
    // CPU; an identical definition this process has validated once is not validated again.
    const key = JSON.stringify(prepared);
    this.machine = new StateMachine(prepared as never, {
      validationOptions: VALIDATED.has(key) ? { noValidate: true } : { checkArn: false },
    });
    VALIDATED.add(key);
  }

  start(o: LocalExecutionOptions): LocalExecution {
    if (!VALID_NAME.test(o.name))
      throw named('InvalidName', `Invalid Name: '${o.name}' (1..80 characters of A-Z, a-z, 0-9, - and _)`);
    this.forgetOldNames(Date.now());
    const inputJson = JSON.stringify(o.input ?? {});
    const known = this.names.get(o.name);
    if (known) {
      if (known.closedAt === undefined && known.inputJson === inputJson) return known.execution;
      throw named('ExecutionAlreadyExists', `Execution Already Exists: '${o.name}'`);
    }
    const missing = [...this.tasks.keys()].filter((t) => !o.taskHandlers[t]);
    // Without a handler the library would call the real Lambda service.
    if (missing.length > 0) throw new Error(`no local handler for Task state(s) ${missing.join(', ')}`);

    const entry = { inputJson } as Entry;
    entry.execution = this.run(o, inputJson, () => {
      entry.closedAt = Date.now();
    });
    this.names.set(o.name, entry);
    this.totals.started++;
    return entry.execution;
  }

  running(): LocalExecution[] {
    return [...this.names.values()].filter((e) => e.closedAt === undefined).map((e) => e.execution);
  }

  stats(): { started: number; failed: number; maxHistoryEvents: number; transitions: number } {
    return { ...this.totals };
  }

  private run(o: LocalExecutionOptions, inputJson: string, onClose: () => void): LocalExecution {
    const handlers = Object.fromEntries(
      [...this.tasks].map(([state, resource]) => [
        state,
        asTaskHandler(resource, o.taskHandlers[state] as TaskHandler),
      ]),
    );
    const run = this.machine.run(JSON.parse(inputJson) as Json, {
      noThrowOnAbort: true,
      overrides: {
        taskResourceLocalHandlers: handlers,
        waitTimeOverrides: o.waitTimeOverrides ?? {},
        ...(o.retryIntervalOverrides ? { retryIntervalOverrides: o.retryIntervalOverrides } : {}),
      },
      context: {
        Execution: { Name: o.name, Id: `arn:aws:states:local:000000000000:execution:local:${o.name}` },
      },
    });
    const counted = { events: 0, transitions: 0 };
    let overLimit = false;
    const drained = (async () => {
      for await (const event of run.eventLogs) {
        const cost = historyCost(event as LoggedEvent);
        counted.events += cost.events;
        counted.transitions += cost.transitions;
        this.totals.transitions += cost.transitions;
        this.totals.maxHistoryEvents = Math.max(this.totals.maxHistoryEvents, counted.events);
        if (counted.events > this.historyLimit && !overLimit) {
          overLimit = true;
          run.abort();
        }
      }
    })();

    const result = (async () => {
      let outcome: { value: unknown } | { error: unknown };
      try {
        outcome = { value: await run.result };
      } catch (error) {
        outcome = { error };
      }
      // The last events arrive after the result; a short bound in case a nested stream stalls.
      await settledWithin(drained, 1_000);
      onClose();
      if (overLimit) {
        this.totals.failed++;
        throw named(
          'HistoryLimitExceeded',
          `execution '${o.name}' exceeded the history limit of ${this.historyLimit} events`,
        );
      }
      if ('error' in outcome) {
        this.totals.failed++;
        throw aslError(outcome.error);
      }
      return outcome.value;
    })();
    // Callers may only look at stats(); an unobserved failure must not end the process.
    result.catch(() => undefined);
    return {
      name: o.name,
      result,
      abort: () => run.abort(),
      history: () => ({ ...counted }),
    };
  }

  private forgetOldNames(now: number): void {
    for (const [name, e] of this.names)
      if (e.closedAt !== undefined && now - e.closedAt > CLOSED_NAME_RETENTION_MS) this.names.delete(name);
  }
}

async function settledWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** The library's ExecutionError wraps the state's error; AWS reports the state's error itself. */
function aslError(err: unknown): Error {
  const e = err as Error | undefined;
  if (e?.name === 'ExecutionTimeoutError') return named('States.Timeout', 'the execution timed out', e);
  const cause = e?.name === 'ExecutionError' && e.cause instanceof Error ? e.cause : e;
  if (cause instanceof Error) return named(cause.name, cause.message, cause);
  return named('States.Runtime', String(err));
}
