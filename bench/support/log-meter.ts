/**
 * What the Host's functions would write to CloudWatch Logs, which bills every GB ingested. The
 * bench runs the Host's core in this process but not its Lambda entries, so it counts two parts:
 *
 * - every line the core writes through the one logger (`lambdas/shared/log.ts`) at the level the
 *   functions run at (Powertools' default, INFO: the constructs set no log level), inside a
 *   Lambda role the bench attributes with its meter, as Powertools Logger prints it there;
 * - what each entry (`lambdas/entries/*.ts`) writes around the core on a call — the batch host's
 *   line per call, the dispatcher step's, the worker's `batch done`, the supervisor's round, and
 *   their EMF metrics — rebuilt here from the call's arguments and answer.
 *
 * Lambda's own START, END and REPORT lines are counted per invocation by the meter. The keys an
 * entry scopes to a call (batch, consumer) are left off the core's lines, most of which name them.
 */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { SupervisorResult } from '../../lambdas/composition/aws-supervisor.ts';
import { HOST_DIMENSION, HOST_METRICS, METRICS_NAMESPACE } from '../../lambdas/shared/aws-env.ts';
import {
  HOST_FUNCTION_MEMORY_MB,
  type HostFunctionMemoryRole,
} from '../../lambdas/shared/host-function-memory.ts';
import { type LogFields, type LogLevel, log } from '../../lambdas/shared/log.ts';
import { currentAttribution, hostFunctionOf } from './meter.ts';

/** Powertools' `service` of each function: the name its entry gives `observability`. */
const SERVICES: Record<HostFunctionMemoryRole, string> = {
  api: 'takoform-api',
  step: 'takoform-dispatcher-step',
  batchHost: 'takoform-batch-host',
  executor: 'takoform-executor',
  supervisor: 'takoform-supervisor',
  worker: 'takoform-worker-runtime',
};

/** CDK names a function up to Lambda's limit of 64 characters; the name is on every line twice. */
const FUNCTION_NAME = 'f'.repeat(64);

/** The keys Powertools adds to every line of an invocation, at their deployed lengths. */
const INVOCATION_KEYS = {
  timestamp: '2026-01-01T00:00:00.000Z',
  cold_start: false,
  function_arn: `arn:aws:lambda:us-east-1:123456789012:function:${FUNCTION_NAME}`,
  function_name: FUNCTION_NAME,
  function_request_id: '00000000-0000-0000-0000-000000000000',
  sampling_rate: 0,
  xray_trace_id: '1-00000000-000000000000000000000000',
};

/** The `host` dimension of every metric: the Host's name. */
const HOST_NAME = 'takoform';

/** An error reaches a line as its name and code only, as `log` reduces it before any sink. */
const reduced = (fields: LogFields): LogFields =>
  Object.fromEntries(
    Object.entries(fields).map(([k, v]) => [
      k,
      v instanceof Error ? { name: v.name, code: (v as { code?: unknown }).code } : v,
    ]),
  );

/** Bytes of one line as Powertools Logger prints it in function `fn`, its newline included. */
export function lineBytes(
  fn: HostFunctionMemoryRole,
  level: LogLevel,
  message: string,
  fields: LogFields,
): number {
  const line = {
    level: level.toUpperCase(),
    message,
    ...INVOCATION_KEYS,
    service: SERVICES[fn],
    function_memory_size: String(HOST_FUNCTION_MEMORY_MB[fn]),
    ...reduced(fields),
  };
  return Buffer.byteLength(JSON.stringify(line)) + 1;
}

const emfSizes = new Map<string, number>();

/** Bytes of the EMF line Powertools Metrics prints when `fn` publishes `counts`. */
export function emfBytes(fn: HostFunctionMemoryRole, counts: Record<string, number>): number {
  const key = `${fn} ${JSON.stringify(counts)}`;
  let bytes = emfSizes.get(key);
  if (bytes === undefined) {
    const metrics = new Metrics({
      namespace: METRICS_NAMESPACE,
      serviceName: SERVICES[fn],
      defaultDimensions: { [HOST_DIMENSION]: HOST_NAME },
    });
    for (const [name, n] of Object.entries(counts)) metrics.addMetric(name, MetricUnit.Count, n);
    bytes = Buffer.byteLength(JSON.stringify(metrics.serializeMetrics())) + 1;
    metrics.clearMetrics();
    emfSizes.set(key, bytes);
  }
  return bytes;
}

let installed = false;

/**
 * Counts each line the Host writes at INFO or above into the meter of the Lambda role it is
 * written in; lines outside a metered role are no function's. Installed once per process.
 */
export function installLogMeter(): void {
  if (installed) return;
  installed = true;
  for (const level of ['info', 'warn', 'error'] as const) {
    const write = log[level];
    log[level] = (message, fields) => {
      const at = currentAttribution();
      if (at?.meter)
        at.meter.logged(at.name, lineBytes(hostFunctionOf(at.name), level, message, fields ?? {}));
      write(message, fields);
    };
  }
}

type SlotLike = { batchId?: string; consumerUid?: string };

/**
 * What `entries/batch-host.ts` writes after a call the bench counted as `role`, from the delivery
 * service's arguments (`directBatchHost`) and its answer or error. Settlements write nothing.
 */
export function batchHostLogBytes(
  role: string,
  args: unknown[],
  answer: { out?: unknown; err?: unknown },
): number {
  const action = role.slice(role.indexOf(':') + 1);
  const [first, , third, fourth] = args;
  const slot = (typeof first === 'object' ? first : (fourth as { slot?: SlotLike } | undefined)?.slot) as
    | SlotLike
    | undefined;
  const batchId = typeof first === 'string' ? first : slot?.batchId;
  if (answer.err !== undefined) {
    const name = (answer.err as { name?: string } | null)?.name ?? 'Error';
    return lineBytes('batchHost', 'warn', 'batch-host call refused', {
      action,
      batchId,
      error: name,
      cause: { name },
    });
  }
  const keys = { batchId, consumerUid: slot?.consumerUid };
  if (action === 'register') {
    const received = args[1] as { envelope: { id: string } }[];
    const deliver = (answer.out as { deliver: { received: number }[] }).deliver;
    const messageIds = deliver.map((d) => received[d.received]?.envelope.id);
    return lineBytes('batchHost', 'info', 'batch registered', { ...keys, messageIds });
  }
  if (action === 'finalize') {
    const counts: Record<string, number> = { [HOST_METRICS.batchesFinalized]: 1 };
    if (third !== 'returned') counts[HOST_METRICS.workerBatchFailures] = 1;
    return (
      lineBytes('batchHost', 'info', 'batch finalize', { ...keys, outcome: third }) +
      emfBytes('batchHost', counts)
    );
  }
  if (action === 'deadLetter') {
    const messageIds = (third as { id: string }[]).map((i) => i.id);
    return lineBytes('batchHost', 'info', 'batch deadLetter', { ...keys, messageIds });
  }
  return action === 'settle' ? 0 : lineBytes('batchHost', 'info', `batch ${action}`, keys);
}

/** What `entries/dispatcher-step.ts` or the worker's runtime writes after a Task of the bench's role. */
export function taskLogBytes(role: string, input: unknown, result: unknown): number {
  const i = (input ?? {}) as { action?: string; lane?: SlotLike; slot?: SlotLike } & SlotLike;
  const r = (result ?? {}) as Record<string, unknown> & { slot?: SlotLike };
  if (hostFunctionOf(role) === 'worker') {
    return lineBytes('worker', 'info', 'batch done', {
      batchId: i.slot?.batchId,
      consumerUid: i.slot?.consumerUid,
      ...r,
    });
  }
  return lineBytes('step', 'info', 'dispatcher step', {
    action: i.action,
    consumerUid: i.lane?.consumerUid ?? i.consumerUid,
    status: r.status,
    waitSeconds: r.waitSeconds,
    handedOver: r.handedOver,
    batchId: r.slot?.batchId ?? (i.action === 'recover' ? i.batchId : undefined),
  });
}

/** What `entries/supervisor.ts` writes after a round: its figures as metrics, then its line. */
export function supervisorLogBytes(r: SupervisorResult): number {
  if (r.skipped)
    return lineBytes('supervisor', 'info', 'supervision round skipped: another round is under way', {});
  const age = r.oldestMessageAgeSeconds;
  const metrics = emfBytes('supervisor', {
    [HOST_METRICS.dispatcherStarts]: r.started,
    [HOST_METRICS.backlogMessages]: r.backlog,
    [HOST_METRICS.deadLetterMessages]: r.deadLetter,
    ...(age !== undefined ? { [HOST_METRICS.oldestMessageAgeSeconds]: age } : {}),
  });
  return metrics + lineBytes('supervisor', 'info', 'supervision round', { ...r });
}
