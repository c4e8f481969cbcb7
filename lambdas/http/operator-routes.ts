import { z } from 'zod';
import { PurgeInProgressError } from '../adapters/aws/sqs-message-reader.ts';
import type { QueueTarget } from '../delivery/ports.ts';
import type { Authenticator, Principal } from '../engine/auth.ts';
import { ID_PATTERN } from '../engine/ids.ts';
import type { ResourceRecord } from '../engine/model.ts';
import { FORM_URLS } from '../forms/form-urls.ts';
import { NO_HISTORY, type QueueHistorySource } from '../operator/queue-history.ts';
import { OPERATOR_LIMITS, OperatorRefusal, type QueueOperator } from '../operator/queue-operator.ts';
import { authenticate } from './api-routes.ts';
import { callerResource } from './ext-access.ts';
import { json } from './handler.ts';
import { HostError } from './problem.ts';
import { PRODUCER_EXTENSION_ROOT, producerProblem } from './producer-routes.ts';
import { idSegment, jsonBody, requireNoBody, requireNoQuery } from './request-parsing.ts';
import type { HttpRequest, HttpResponse } from './types.ts';

export interface OperatorRoutesOptions {
  authenticator: Authenticator;
  getResource(uid: string): Promise<ResourceRecord | undefined>;
  targetOf(r: ResourceRecord): Promise<QueueTarget | undefined>;
  operator: QueueOperator;
  /** The console's chart data; without it `history` answers `available: false`. */
  history?: QueueHistorySource;
}

const limitField = (max: number) => z.number().int().min(1).max(max).optional();
/** Chosen messages, by the ids a peek shows (host-profile §5: 1..256 characters). */
const messageIdsField = z.array(z.string().min(1).max(256)).min(1).max(OPERATOR_LIMITS.maxRedrive).optional();
const peekBody = z.strictObject({
  limit: limitField(OPERATOR_LIMITS.maxPeek),
  sourceQueue: z.string().regex(ID_PATTERN).optional(),
  lastOutcome: z.string().min(1).max(64).optional(),
});
const redriveBody = z
  .strictObject({
    to: z.string().regex(ID_PATTERN),
    limit: limitField(OPERATOR_LIMITS.maxRedrive),
    messageIds: messageIdsField,
  })
  .refine((b) => b.limit === undefined || b.messageIds === undefined, {
    message: 'give limit or messageIds, not both',
  });
const purgeBody = z.strictObject({ messageIds: messageIdsField });

/** A closed JSON object body, `{}` when the request has none; shape errors are `invalid_request`. */
function bodyOf<T>(req: HttpRequest, schema: z.ZodType<T>): T {
  const value = req.body && req.body.length > 0 ? jsonBody(req) : {};
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : 'body';
    throw new HostError(
      'invalid_request',
      `the request body is invalid at ${where}: ${issue?.message ?? ''}`,
    );
  }
  return parsed.data;
}

function method(req: HttpRequest, allowed: 'GET' | 'POST'): void {
  if (req.method !== allowed) throw new HostError('method_not_allowed', undefined, { allow: allowed });
  requireNoQuery(req);
  if (allowed === 'GET') requireNoBody(req);
}

const QUEUE_ROUTE = /^\/ext\/queues\/v1\/queues\/([^/]+)\/(stats|history|peek|redrive|purge)$/;
const CONSUMER_ROUTE = /^\/ext\/queues\/v1\/consumers\/([^/]+)\/state$/;

/**
 * The operator endpoints under `/ext/queues/v1` (Bearer auth; `read` on the Resource's Space,
 * `write` for redrive and purge). Returns undefined for paths that are not theirs.
 */
export function createOperatorRoutes(opts: OperatorRoutesOptions) {
  const { operator } = opts;

  const liveQueue = async (p: Principal, rawUid: string, need: 'read' | 'write'): Promise<QueueTarget> => {
    const r = await callerResource(p, idSegment(rawUid), opts.getResource, need);
    const target = await opts.targetOf(r);
    if (!target) throw new HostError('not_found');
    return target;
  };

  const queueAction = async (req: HttpRequest, p: Principal, uid: string, action: string) => {
    switch (action) {
      case 'stats': {
        method(req, 'GET');
        const stats = await operator.stats(await liveQueue(p, uid, 'read'));
        if (!stats) throw new HostError('not_found');
        return json(200, stats);
      }
      case 'history': {
        method(req, 'GET');
        const q = await liveQueue(p, uid, 'read');
        return json(200, opts.history ? await opts.history.view(q) : NO_HISTORY);
      }
      case 'peek': {
        method(req, 'POST');
        const q = await liveQueue(p, uid, 'read');
        const { limit, ...filter } = bodyOf(req, peekBody);
        return json(200, {
          messages: await operator.peek(q, limit ?? OPERATOR_LIMITS.defaultPeek, filter),
        });
      }
      case 'redrive': {
        method(req, 'POST');
        const from = await liveQueue(p, uid, 'write');
        const body = bodyOf(req, redriveBody);
        const to = await liveQueue(p, body.to, 'write');
        if (to.space !== from.space) {
          throw new HostError('invalid_request', 'the target queue must be in the same Space');
        }
        if (body.messageIds) return json(200, await operator.redriveChosen(from, to, body.messageIds));
        return json(200, await operator.redrive(from, to, body.limit ?? OPERATOR_LIMITS.defaultRedrive));
      }
      default: {
        method(req, 'POST');
        const q = await liveQueue(p, uid, 'write');
        const { messageIds } = bodyOf(req, purgeBody);
        if (messageIds) return json(200, { purged: false, ...(await operator.purgeChosen(q, messageIds)) });
        await operator.purge(q);
        return json(200, { purged: true });
      }
    }
  };

  const consumerState = async (req: HttpRequest, p: Principal, rawUid: string) => {
    method(req, 'GET');
    const r = await callerResource(p, idSegment(rawUid), opts.getResource, 'read');
    if (r.form !== FORM_URLS.queueConsumer || r.deletedAt) throw new HostError('not_found');
    return json(200, await operator.consumerState(r.uid));
  };

  const me = (req: HttpRequest, p: Principal) => {
    method(req, 'GET');
    return json(200, { principal: p.id, spaces: Object.fromEntries(p.spaces) });
  };

  return async (req: HttpRequest): Promise<HttpResponse | undefined> => {
    const q = QUEUE_ROUTE.exec(req.path);
    const c = q ? null : CONSUMER_ROUTE.exec(req.path);
    const isMe = req.path === `${PRODUCER_EXTENSION_ROOT}/me`;
    if (!q && !c && !isMe) return undefined;
    const principal = await authenticate(req, opts.authenticator);
    try {
      if (q?.[1] && q[2]) return await queueAction(req, principal, q[1], q[2]);
      if (c?.[1]) return await consumerState(req, principal, c[1]);
      return me(req, principal);
    } catch (err) {
      if (err instanceof OperatorRefusal) {
        throw err.reason === 'live_consumer'
          ? new HostError('dependency_conflict', err.message)
          : new HostError('invalid_request', err.message);
      }
      if (err instanceof PurgeInProgressError) {
        throw new HostError('rate_limited', 'SQS allows one purge of a queue per 60 seconds', {
          'retry-after': '60',
        });
      }
      throw producerProblem(err);
    }
  };
}
