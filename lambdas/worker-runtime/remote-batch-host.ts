/**
 * The worker runtime's view of the Host on AWS: every BatchHostPort call (plus `produce`) is one
 * synchronous invocation of the batch-host function (the runner groups a batch's settle calls
 * into `settleMany`). The transport is a function so tests can call the handler in process;
 * `lambdaTransport` is the AWS one.
 */
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import {
  type BatchHostRequest,
  type BatchHostResponse,
  PAYLOAD_LIMIT_BYTES,
  PRODUCE_ERRORS,
  SETTLE_ERRORS,
  toBase64,
} from '../delivery/batch-host-protocol.ts';
import type { BatchHostPort } from '../delivery/batch-runner.ts';
import type { AcquireResult, DeadLetterItem, Finalized, Registration } from '../delivery/delivery-service.ts';
import { MESSAGE_LIMITS, NamedError } from '../delivery/limits.ts';
import type { ProduceCall, SettleAnswer } from '../delivery/settlement-protocol.ts';

export type BatchHostTransport = (request: BatchHostRequest) => Promise<BatchHostResponse>;

export interface RemoteBatchHost extends BatchHostPort {
  produce(batchId: string, credential: string, call: ProduceCall): Promise<string[]>;
}

/** How long, and how, an invocation Lambda throttled is tried again. */
export interface ThrottleRetry {
  /** Total time spent waiting between tries at most; then the throttle is the answer. */
  budgetMs: number;
  /** The first wait's upper bound; it doubles per try up to `capMs` (full jitter below it). */
  baseMs: number;
  capMs: number;
  /**
   * The call's own time limit (epoch ms), past which no wait ends: a throttle is waited out
   * only while the answer can still be used (`hostCallDeadlines`). @default none (`budgetMs` only)
   */
  until?: (request: BatchHostRequest, began: number) => number | undefined;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  clock?: () => number;
}

/**
 * A throttle means the account's (or the batch host's reserved) concurrency is used up for now:
 * the call did not run, and waiting it out is better than failing the batch's call. The budget is
 * a backstop; the call's own limits (`until`) end the waiting first on a worker.
 */
export const DEFAULT_THROTTLE_RETRY: ThrottleRetry = { budgetMs: 120_000, baseMs: 100, capMs: 2_000 };

/** Left at a call's limit for the call itself, once the last wait ended. */
export const HOST_CALL_RESERVE_MS = 1_000;

/** The slot a request names, if any (`previous` of an acquire: the slot it was taken under). */
function slotOf(request: BatchHostRequest): { batchId: string; deadline: number } | undefined {
  if ('slot' in request) return request.slot;
  if (request.action === 'acquire') return request.previous;
  return undefined;
}

/**
 * The time limits of a worker invocation's Host calls: the invocation's end (`lambdaEnd`), the
 * deadline of the slot a call is for (a call about a batch — settle, produce — is bounded by the
 * deadline of the slot it was registered under: past it, recovery finishes the batch), and for a
 * registration the time its messages stay hidden. Each less `HOST_CALL_RESERVE_MS`.
 */
export function hostCallDeadlines(lambdaEnd: number): NonNullable<ThrottleRetry['until']> {
  const batchDeadlines = new Map<string, number>();
  return (request, began) => {
    const slot = slotOf(request);
    if (slot) batchDeadlines.set(slot.batchId, slot.deadline);
    const batchId = 'batchId' in request ? request.batchId : undefined;
    let limit = Math.min(lambdaEnd, slot?.deadline ?? batchDeadlines.get(batchId ?? '') ?? lambdaEnd);
    if (request.action === 'register' && request.visibleForMs !== undefined)
      limit = Math.min(limit, began + request.visibleForMs);
    return limit - HOST_CALL_RESERVE_MS;
  };
}

/**
 * How `register` is sent again when the batch host gave no answer (the transport threw: a lost
 * answer, a failed request, a function that failed before answering). Safe for `register` alone:
 * a repeat with the same slot and received messages is answered as the first call was, if that
 * call registered the batch (`registration-repeat.ts`), and registers it if it did not.
 */
export interface UnansweredRetry {
  /** Tries in all, the first included. */
  tries: number;
  /**
   * A try starts only this soon after the first one began, so the repeat finds the messages still
   * hidden: registration has at least 5 s of their room from its start (received ahead:
   * `AHEAD_USABLE_MS`), 30 s after gathering otherwise.
   */
  withinMs: number;
  /** The wait before the n-th repeat: baseMs × 2^(n-1). */
  baseMs: number;
  sleep?: (ms: number) => Promise<void>;
  clock?: () => number;
}

export const DEFAULT_REGISTER_RETRY: UnansweredRetry = { tries: 3, withinMs: 2_000, baseMs: 100 };

/** The batch host did not answer: the call may or may not have taken effect. */
export class NoAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NoAnswer';
  }
}

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Lambda refused to start the function (429): it did not run, so trying again is safe. */
const isThrottle = (err: unknown) =>
  (err as Error)?.name === 'TooManyRequestsException' ||
  (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode === 429;

/**
 * A synchronous invocation of the batch-host function. A throttle (the account's or the batch
 * host's reserved concurrency is used up, e.g. by many lanes settling at once) is tried again with
 * backoff and full jitter for as long as the call's answer can still be used (`retry.until`,
 * within `retry.budgetMs`), on top of the SDK's own few retries. Nothing else is tried again here: after a
 * FunctionError or a lost answer the function may have run (`remoteBatchHost` repeats `register`
 * alone, which is safe). A FunctionError is no answer: it throws `NoAnswerError`.
 */
export function lambdaTransport(
  client: Pick<LambdaClient, 'send'>,
  functionName: string,
  retry: ThrottleRetry = DEFAULT_THROTTLE_RETRY,
): BatchHostTransport {
  const sleep = retry.sleep ?? pause;
  const random = retry.random ?? Math.random;
  const clock = retry.clock ?? Date.now;
  const invoke = async (request: BatchHostRequest) => {
    const began = clock();
    const limit = retry.until?.(request, began) ?? Number.POSITIVE_INFINITY;
    let waited = 0;
    for (let attempt = 0; ; attempt++) {
      try {
        return await client.send(
          new InvokeCommand({
            FunctionName: functionName,
            InvocationType: 'RequestResponse',
            Payload: new TextEncoder().encode(JSON.stringify(request)),
          }),
        );
      } catch (err) {
        const wait = random() * Math.min(retry.capMs, retry.baseMs * 2 ** attempt);
        if (!isThrottle(err) || waited + wait > retry.budgetMs || clock() + wait > limit) throw err;
        waited += wait;
        await sleep(wait);
      }
    }
  };
  return async (request) => {
    const out = await invoke(request);
    if (out.FunctionError || !out.Payload) {
      throw new NoAnswerError(
        `the batch host failed before answering (${out.FunctionError ?? 'no payload'})`,
      );
    }
    return JSON.parse(new TextDecoder().decode(out.Payload)) as BatchHostResponse;
  };
}

type ErrorKind = 'settle' | 'produce' | 'runner';

/** A rejection as worker code may see it: a listed name with its fixed message. */
function rebuild(error: { name: string }, kind: ErrorKind): Error {
  const table = kind === 'settle' ? SETTLE_ERRORS : kind === 'produce' ? PRODUCE_ERRORS : undefined;
  if (!table) return Object.assign(new Error('the Host refused the call'), { name: error.name.slice(0, 64) });
  const name = Object.hasOwn(table, error.name) ? error.name : 'backend_unavailable';
  const message = table[name] ?? 'the Host could not complete the call';
  if (name === 'TypeError') return new TypeError(message);
  return new NamedError(name as ConstructorParameters<typeof NamedError>[0], message);
}

const serializedSize = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

const wireItem = (item: DeadLetterItem) => ({ id: item.id, body: toBase64(item.body) });

/** Calls that carry bodies (moves, deferrals) are split so that none exceeds the payload limit. */
function byPayload<T>(items: readonly T[]): T[][] {
  const parts: T[][] = [[]];
  let bytes = 0;
  for (const item of items) {
    const size = serializedSize(item);
    const current = parts[parts.length - 1] as T[];
    if (current.length > 0 && bytes + size > PAYLOAD_LIMIT_BYTES - 100_000) {
      parts.push([item]);
      bytes = size;
    } else {
      current.push(item);
      bytes += size;
    }
  }
  return parts;
}

/**
 * The batch host's answer to `request`; a call it gave none to (the transport threw) is sent
 * again only under `again`, within its tries and time.
 */
async function answerOf(
  transport: BatchHostTransport,
  request: BatchHostRequest,
  again: UnansweredRetry | undefined,
): Promise<BatchHostResponse> {
  const clock = again?.clock ?? Date.now;
  const began = clock();
  for (let tried = 1; ; tried++) {
    try {
      return await transport(request);
    } catch (err) {
      if (!again || tried >= again.tries) throw err;
      const wait = again.baseMs * 2 ** (tried - 1);
      if (clock() + wait - began >= again.withinMs) throw err;
      await (again.sleep ?? pause)(wait);
    }
  }
}

/**
 * A BatchHostPort over `transport`. `register` is sent again when the batch host gave no answer
 * (`UnansweredRetry`); no other call is.
 */
export function remoteBatchHost(
  transport: BatchHostTransport,
  opts: { registerRetry?: UnansweredRetry } = {},
): RemoteBatchHost {
  const registerRetry = opts.registerRetry ?? DEFAULT_REGISTER_RETRY;
  const call = async <T>(request: BatchHostRequest, kind: ErrorKind, again?: UnansweredRetry): Promise<T> => {
    let answer: BatchHostResponse;
    try {
      answer = await answerOf(transport, request, again);
    } catch {
      throw rebuild({ name: 'backend_unavailable' }, kind === 'runner' ? 'settle' : kind);
    }
    if (!answer.ok) throw rebuild(answer.error, kind);
    return answer.value as T;
  };

  return {
    acquire: (previous, credential) =>
      call<AcquireResult>({ action: 'acquire', previous, credential }, 'runner'),
    register: (slot, received, o) =>
      call<Registration>(
        {
          action: 'register',
          slot,
          received,
          ...(o?.goOn ? { goOn: true } : {}),
          ...(o?.visibleForMs !== undefined ? { visibleForMs: o.visibleForMs } : {}),
        },
        'runner',
        registerRetry,
      ),
    settle: async (batchId, credential, settleCall) => {
      await call({ action: 'settle', batchId, credential, call: settleCall }, 'settle');
    },
    settleMany: async (batchId, credential, calls) => {
      const answers = await call<unknown>({ action: 'settleMany', batchId, credential, calls }, 'settle');
      if (!Array.isArray(answers) || answers.length !== calls.length) {
        throw rebuild({ name: 'backend_unavailable' }, 'settle');
      }
      // Anything but a listed answer counts as not recorded.
      return answers.map(
        (a): SettleAnswer =>
          a === 'ok' || a === 'unknown_batch' || a === 'already_settled' ? a : 'backend_unavailable',
      );
    },
    finalize: (slot, credential, outcome, opts = {}) =>
      call<Finalized>(
        {
          action: 'finalize',
          slot,
          credential,
          outcome,
          ...(opts.next ? { next: true } : {}),
          ...(opts.manifest ? { manifest: opts.manifest } : {}),
          ...(opts.error ? { error: opts.error } : {}),
          ...(opts.handlerMayRun ? { handlerMayRun: true } : {}),
        },
        'runner',
      ),
    deadLetter: async (slot, credential, items) => {
      // The batch is finished (slot released) only by the last part.
      const parts = byPayload(items.map(wireItem));
      for (const [i, part] of parts.entries()) {
        await call(
          { action: 'deadLetter', slot, credential, items: part, last: i === parts.length - 1 },
          'runner',
        );
      }
    },
    defer: async (slot, items) => {
      // Bodies: split so no call exceeds the payload limit.
      const wire = items.map((i) => ({ ...i, body: toBase64(i.body) }));
      for (const part of byPayload(wire)) await call({ action: 'defer', slot, items: part }, 'runner');
    },
    produce: async (batchId, credential, produceCall) => {
      const messages = produceCall.messages.map((m) => {
        if (m.body.byteLength > MESSAGE_LIMITS.maxBodyBytes) {
          throw rebuild({ name: 'message_too_large' }, 'produce');
        }
        return { ...m, body: toBase64(m.body) };
      });
      const request: BatchHostRequest = {
        action: 'produce',
        batchId,
        credential,
        binding: produceCall.binding,
        messages,
      };
      if (serializedSize(request) > PAYLOAD_LIMIT_BYTES)
        throw rebuild({ name: 'batch_too_large' }, 'produce');
      return call<string[]>(request, 'produce');
    },
  };
}
