/**
 * Faults of the local Host's Lambda invocations. The local Host calls the worker, the dispatcher
 * step and the batch host as functions, with no Lambda client in between; `withLambdaInvokeFaults`
 * wraps them, configured under `localInvoke` in TAKOFORM_FAULTS (per invocation; unset rates are 0):
 *
 * ```json
 * {"seed":7,"localInvoke":{"tooManyRequests":0.05,"serviceError":0.02,"timeout":0.01,
 *  "timeoutMs":5000,"overlap":0.02,"functions":{"worker":{"timeout":0.1}}}}
 * ```
 *
 * - `tooManyRequests`: throws `Lambda.TooManyRequestsException`; the function did not run.
 * - `serviceError`: throws `Lambda.ServiceException`, drawn half before the function runs (it did
 *   not run) and half after it ran (its result is lost), as the caller of Lambda cannot tell which.
 * - `timeout`: the function runs, but the invocation never answers: with `timeoutMs` it rejects
 *   with `Lambda.Timeout` after that many ms; without, it never settles and the caller's own bound
 *   (the Task's `TimeoutSeconds`, i.e. `States.Timeout`) ends it. The function is not stopped.
 * - `overlap`: the function runs on, and within a drawn 0..`overlapAfterMs` ms (default 2000; at
 *   its end if sooner) the caller sees `Lambda.ServiceException` or `Lambda.SdkClientException`,
 *   as when Lambda's answer or Step Functions' connection to it is lost. Both are in the
 *   dispatcher's Retry (dispatcher-definition.ts), so the state machine starts a second
 *   invocation with the same input while the first still runs: two runners of one lane's slot,
 *   two AcquireSlot steps of one lane.
 * - `lambdaCutOff` (default true whenever `localInvoke` is set): a handler cut off at its time
 *   bound runs on, as on Lambda, until its lane's invocation ends (local-lanes.ts, worker-pool.ts).
 * - `functions`: per-label rates (`worker`, `step`, `batch-host`); unset ones inherit.
 * The errors are plain Errors with the names the Step Functions Lambda integration reports, which
 * is what an ASL `Retry`/`Catch` matches on.
 */
import { log } from '../../shared/log.ts';
import {
  FAULTS_ENV,
  type FaultConfig,
  faultConfigFromEnv,
  type LocalInvokeLabel,
  type localInvokeRates,
} from './fault-config.ts';
import { type FaultKind, report } from './fault-reports.ts';
import { Streams } from './fault-streams.ts';
import { INJECTED } from './sdk-faults.ts';

let announcedInvokes = false;
const DEFAULT_OVERLAP_AFTER_MS = 2_000;

const invokeError = (name: string, message: string): Error =>
  Object.assign(new Error(`${message}${INJECTED}`), { name });

/**
 * `fn` as a Lambda invocation that can throttle, fail or time out, per `localInvoke` in
 * `TAKOFORM_FAULTS` (or `config`); without that section `fn` itself is returned. Each wrapped
 * function draws from its own streams (seed, label), so a schedule repeats with the same calls.
 */
export function withLambdaInvokeFaults<P, T>(
  fn: (payload: P) => Promise<T>,
  label: LocalInvokeLabel,
  config?: FaultConfig,
): (payload: P) => Promise<T> {
  const fromEnv = config === undefined;
  config ??= faultConfigFromEnv();
  const settings = config?.localInvoke;
  if (!config || !settings) return fn;
  if (fromEnv && !announcedInvokes) {
    announcedInvokes = true;
    log.warn(`${FAULTS_ENV} is set: injecting Lambda invocation faults`, { seed: config.seed });
  }
  const streams = new Streams(`${config.seed}|localInvoke|${label}`);
  const rate = (kind: keyof typeof localInvokeRates) =>
    settings.functions?.[label]?.[kind] ?? settings[kind] ?? 0;
  const fires = (kind: keyof typeof localInvokeRates) => {
    const p = rate(kind);
    return p > 0 && streams.next(kind) < p;
  };
  const injected = (kind: FaultKind, error: string, ran: boolean) =>
    report({ service: 'lambda', label, operation: 'Invoke', kind, error, ran });

  return async (payload) => {
    /** Runs `fn` to its end, whatever it throws (even synchronously): its outcome is lost. */
    const runQuietly = () =>
      Promise.resolve()
        .then(() => fn(payload))
        .then(
          () => undefined,
          () => undefined,
        );
    if (fires('tooManyRequests')) {
      injected('tooManyRequests', 'Lambda.TooManyRequestsException', false);
      throw invokeError('Lambda.TooManyRequestsException', 'Rate Exceeded.');
    }
    if (fires('serviceError')) {
      const after = streams.next('serviceError-when') < 0.5;
      // After: the function ran to its end and only the answer is lost.
      if (after) await runQuietly();
      injected('serviceError', 'Lambda.ServiceException', after);
      throw invokeError('Lambda.ServiceException', 'The service encountered an internal error.');
    }
    if (fires('overlap')) {
      // Step Functions names a failure Lambda reported ServiceException, one its own connection
      // met SdkClientException; both are retried by the dispatcher's Retry.
      const error =
        streams.next('overlap-error') < 0.5 ? 'Lambda.ServiceException' : 'Lambda.SdkClientException';
      const after = streams.int('overlap-after', 0, settings.overlapAfterMs ?? DEFAULT_OVERLAP_AFTER_MS);
      injected('overlap', error, true);
      // The function runs on beside whatever the caller's retry starts; its outcome is lost.
      const running = runQuietly();
      await Promise.race([running, new Promise((r) => setTimeout(r, after))]);
      throw invokeError(error, 'The service encountered an internal error.');
    }
    if (fires('timeout')) {
      injected('timeout', 'Lambda.Timeout', true);
      // The function runs on; its outcome never reaches the caller.
      void runQuietly();
      return new Promise<T>((_, reject) => {
        if (settings.timeoutMs !== undefined)
          setTimeout(
            () => reject(invokeError('Lambda.Timeout', `Task timed out after ${settings.timeoutMs} ms.`)),
            settings.timeoutMs,
          );
      });
    }
    return fn(payload);
  };
}
