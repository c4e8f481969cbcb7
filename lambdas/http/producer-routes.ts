import { MESSAGE_LIMITS, NamedError } from '../delivery/limits.ts';
import type { QueueTarget } from '../delivery/ports.ts';
import type { Authenticator } from '../engine/auth.ts';
import type { ResourceRecord } from '../engine/model.ts';
import { authenticate } from './api-routes.ts';
import { callerResource } from './ext-access.ts';
import { isTransientBackendError, json } from './handler.ts';
import { HostError } from './problem.ts';
import { idSegment, isPlainObject, jsonBody, requireNoQuery } from './request-parsing.ts';
import type { HttpRequest, HttpResponse } from './types.ts';

/** The HTTP producer extension's root (host-profile §3). */
export const PRODUCER_EXTENSION_ROOT = '/ext/queues/v1';

export interface ProducerRoutesOptions {
  authenticator: Authenticator;
  /** The Resource record by uid (consistent read), whatever its Form or state. */
  getResource(uid: string): Promise<ResourceRecord | undefined>;
  /** Where a live queue Resource's messages go; undefined when it is not a live queue. */
  targetOf(r: ResourceRecord): Promise<QueueTarget | undefined>;
  /** The shared producer rules (`QueueProducer.sendBatch`). */
  sendBatch(target: QueueTarget, messages: unknown): Promise<string[]>;
}

/** Canonical padded base64 of the standard alphabet; the decoded bytes must re-encode to it. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function decodedLength(b64: string): number {
  const pad = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
  return (b64.length / 4) * 3 - pad;
}

/**
 * `{"messages":[{"body":"<base64>","delaySeconds"?:int}]}` (closed objects) into the items
 * `sendBatch` takes. Codes per host-profile §3: envelope shape, unknown fields, an empty list
 * and a bad `delaySeconds` are `invalid_request`; a `body` that is missing, not a string or not
 * canonical base64 is `invalid_body`; limits are `batch_too_large` / `message_too_large`.
 */
export function parseMessagesRequest(value: unknown): { body: Uint8Array; delaySeconds?: number }[] {
  if (!isPlainObject(value)) throw new HostError('invalid_request', 'the body must be a JSON object');
  for (const key of Object.keys(value)) {
    if (key !== 'messages')
      throw new HostError('invalid_request', `unknown field ${JSON.stringify(key.slice(0, 64))}`);
  }
  const list = value.messages;
  if (!Array.isArray(list)) throw new HostError('invalid_request', 'messages must be an array');
  if (list.length === 0) throw new HostError('invalid_request', 'messages must not be empty');
  if (list.length > MESSAGE_LIMITS.maxBatchMessages) {
    throw new HostError('batch_too_large', `at most ${MESSAGE_LIMITS.maxBatchMessages} messages per request`);
  }
  return list.map((item: unknown, i) => {
    const at = `messages[${i}]`;
    if (!isPlainObject(item)) throw new HostError('invalid_request', `${at} must be an object`);
    for (const key of Object.keys(item)) {
      if (key !== 'body' && key !== 'delaySeconds') {
        throw new HostError(
          'invalid_request',
          `${at} has an unknown field ${JSON.stringify(key.slice(0, 64))}`,
        );
      }
    }
    const out: { body: Uint8Array; delaySeconds?: number } = { body: decodeBody(item.body, at) };
    if (Object.hasOwn(item, 'delaySeconds')) {
      const d = item.delaySeconds;
      if (typeof d !== 'number' || !Number.isInteger(d) || d < 0 || d > MESSAGE_LIMITS.maxDelaySeconds) {
        throw new HostError(
          'invalid_request',
          `${at}.delaySeconds must be an integer in 0..${MESSAGE_LIMITS.maxDelaySeconds}`,
        );
      }
      out.delaySeconds = d;
    }
    return out;
  });
}

function decodeBody(body: unknown, at: string): Uint8Array {
  if (typeof body !== 'string') throw new HostError('invalid_body', `${at}.body must be a base64 string`);
  if (body.length % 4 !== 0 || !BASE64.test(body)) {
    throw new HostError('invalid_body', `${at}.body is not canonical base64`);
  }
  if (decodedLength(body) > MESSAGE_LIMITS.maxBodyBytes) {
    throw new HostError('message_too_large', `${at}.body is over ${MESSAGE_LIMITS.maxBodyBytes} bytes`);
  }
  const bytes = Buffer.from(body, 'base64');
  // Non-zero bits in the last character's unused positions would decode the same as others.
  if (bytes.toString('base64') !== body)
    throw new HostError('invalid_body', `${at}.body is not canonical base64`);
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * A producer rule's refusal as its Problem (host-profile §3); anything else unchanged. A backing
 * store that does not answer (reading the queue Resource, say) is `backend_unavailable` as well:
 * nothing was sent, and the producer's retry is the way on.
 */
export function producerProblem(err: unknown): unknown {
  if (!(err instanceof HostError) && !(err instanceof NamedError) && isTransientBackendError(err)) {
    return new HostError('backend_unavailable', 'a backing store is unavailable; retry the send', {
      'retry-after': '2',
    });
  }
  if (err instanceof NamedError) {
    switch (err.name) {
      case 'invalid_body':
      case 'message_too_large':
      case 'batch_too_large':
      case 'backend_unavailable':
        return new HostError(err.name, err.message);
    }
  }
  return err;
}

/**
 * `POST /ext/queues/v1/queues/{queueUid}/messages`: the same Bearer authentication as the API;
 * the queue must be the caller's (else 404, as the API does for others' Resources) and the
 * caller needs `write` on its Space (else 403). Not idempotent: a retried request can send the
 * messages again, with new ids, as a retried `sendBatch` can.
 */
export function createProducerRoutes(opts: ProducerRoutesOptions) {
  const messages = async (req: HttpRequest, rawUid: string): Promise<HttpResponse> => {
    try {
      const principal = await authenticate(req, opts.authenticator);
      if (req.method !== 'POST') throw new HostError('method_not_allowed', undefined, { allow: 'POST' });
      requireNoQuery(req);
      const resource = await callerResource(principal, idSegment(rawUid), opts.getResource, 'write');
      const target = await opts.targetOf(resource);
      if (!target) throw new HostError('not_found');
      const items = parseMessagesRequest(jsonBody(req));
      return json(200, { messageIds: await opts.sendBatch(target, items) });
    } catch (err) {
      throw producerProblem(err);
    }
  };

  return async (req: HttpRequest): Promise<HttpResponse> => {
    const m = /^\/ext\/queues\/v1\/queues\/([^/]+)\/messages$/.exec(req.path);
    if (m?.[1]) return messages(req, m[1]);
    if (req.path === PRODUCER_EXTENSION_ROOT || req.path.startsWith(`${PRODUCER_EXTENSION_ROOT}/`)) {
      await authenticate(req, opts.authenticator);
    }
    throw new HostError('not_found');
  };
}
