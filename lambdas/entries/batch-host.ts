/**
 * Lambda entry of the batch host: the Host side of worker runtimes (`register`, `settle`,
 * `settleMany`, `finalize`, `deadLetter`, `produce`; see batch-host-protocol.ts). Invoked synchronously by
 * worker functions, which may invoke this function and nothing else of the Host (SEC-02).
 *
 * Every input is validated; every answer is `{ok, value}` or `{ok: false, error: {name,
 * message}}` with a listed name and a fixed message, so no Host detail reaches worker code.
 */
import type { Context } from 'aws-lambda';
import { type AwsHost, awsHostFromEnv } from '../composition/aws-host.ts';
import {
  errorFields,
  logThroughPowertools,
  MetricUnit,
  observability,
} from '../composition/aws-observability.ts';
import {
  type BatchHostRequest,
  type BatchHostResponse,
  batchHostRequestSchema,
  PRODUCE_ERRORS,
  SETTLE_ERRORS,
  wireError,
} from '../delivery/batch-host-protocol.ts';
import { HOST_METRICS } from '../shared/aws-env.ts';
import { log } from '../shared/log.ts';

/** Errors of the runner's own calls (register, finalize, deadLetter). */
const RUNNER_ERRORS: Readonly<Record<string, string>> = {
  unknown_batch: 'the batch is not open',
  invalid_request: 'the call is malformed',
  backend_unavailable: 'the Host could not complete the call',
};

const obs = observability('takoform-batch-host');

const isSettlement = (action: unknown) => action === 'settle' || action === 'settleMany';

function errorTable(action: unknown) {
  if (isSettlement(action)) return SETTLE_ERRORS;
  if (action === 'produce') return PRODUCE_ERRORS;
  return RUNNER_ERRORS;
}

/** What a malformed call is refused as: the name its caller would get for a bad argument. */
function malformed(action: unknown): BatchHostResponse {
  if (isSettlement(action)) return { ok: false, error: wireError(new TypeError(), SETTLE_ERRORS) };
  if (action === 'produce') {
    const err = Object.assign(new Error(), { name: 'invalid_body' });
    return { ok: false, error: wireError(err, PRODUCE_ERRORS) };
  }
  const err = Object.assign(new Error(), { name: 'invalid_request' });
  return { ok: false, error: wireError(err, RUNNER_ERRORS) };
}

export function createBatchHostHandler(host: AwsHost) {
  return async (event: unknown): Promise<BatchHostResponse> => {
    const action = (event as { action?: unknown } | null)?.action;
    const parsed = batchHostRequestSchema.safeParse(event);
    if (!parsed.success) {
      log.warn('malformed batch-host call', { action: String(action).slice(0, 32) });
      return malformed(action);
    }
    const request = parsed.data;
    const batchId =
      'slot' in request
        ? request.slot.batchId
        : 'previous' in request
          ? request.previous.batchId
          : request.batchId;
    const consumerUid =
      'slot' in request
        ? request.slot.consumerUid
        : 'previous' in request
          ? request.previous.consumerUid
          : undefined;
    return log.withKeys({ batchId, ...(consumerUid ? { consumerUid } : {}) }, () =>
      answer(host, request, batchId),
    );
  };
}

/** One validated call, answered; its log lines carry the batch (and consumer) as keys. */
async function answer(host: AwsHost, request: BatchHostRequest, batchId: string): Promise<BatchHostResponse> {
  try {
    const value = await host.batchHost.handle(request);
    if (request.action === 'register') {
      const r = value as { deliver: { received: number }[] };
      log.info('batch registered', {
        batchId,
        consumerUid: request.slot.consumerUid,
        messageIds: r.deliver.map((d) => request.received[d.received]?.envelope.id),
      });
    } else if (!isSettlement(request.action)) {
      log.info(`batch ${request.action}`, {
        batchId,
        ...(request.action === 'finalize' ? { outcome: request.outcome } : {}),
        ...(request.action === 'deadLetter' ? { messageIds: request.items.map((i) => i.id) } : {}),
      });
    }
    return { ok: true, value: value ?? null };
  } catch (err) {
    const error = wireError(err, errorTable(request.action));
    log.warn('batch-host call refused', {
      action: request.action,
      batchId,
      error: error.name,
      cause: errorFields(err),
    });
    return { ok: false, error };
  }
}

let ready: Promise<ReturnType<typeof createBatchHostHandler>> | undefined;

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv({
    onFinalized: (outcome) => {
      obs.metrics.addMetric(HOST_METRICS.batchesFinalized, MetricUnit.Count, 1);
      if (outcome !== 'returned')
        obs.metrics.addMetric(HOST_METRICS.workerBatchFailures, MetricUnit.Count, 1);
    },
    onDeadLettered: (count) =>
      obs.metrics.addMetric(HOST_METRICS.messagesDeadLettered, MetricUnit.Count, count),
  }).then((host) => {
    logThroughPowertools(obs);
    return createBatchHostHandler(host);
  });
  try {
    return await (await ready)(event);
  } finally {
    // Most calls (settle) record no metric; publishing an empty set would only log a warning.
    if (obs.metrics.hasStoredMetrics()) obs.metrics.publishStoredMetrics();
  }
};
