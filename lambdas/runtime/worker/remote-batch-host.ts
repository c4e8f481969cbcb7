/**
 * The worker runtime's view of the Host on AWS: every BatchHostPort call (plus `produce`) is one
 * synchronous invocation of the batch-host function. The transport is a function so tests can
 * call the handler in process; `lambdaTransport` is the AWS one.
 */
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import {
  type BatchHostRequest,
  type BatchHostResponse,
  PAYLOAD_LIMIT_BYTES,
  PRODUCE_ERRORS,
  SETTLE_ERRORS,
  toBase64,
} from '../../delivery/batch-host-protocol.ts';
import type { BatchHostPort } from '../../delivery/batch-runner.ts';
import type { AcquireResult, DeadLetterItem, Registration } from '../../delivery/delivery-service.ts';
import { MESSAGE_LIMITS, NamedError } from '../../delivery/limits.ts';
import type { ProduceCall } from '../../delivery/settlement-protocol.ts';

export type BatchHostTransport = (request: BatchHostRequest) => Promise<BatchHostResponse>;

export interface RemoteBatchHost extends BatchHostPort {
  produce(batchId: string, credential: string, call: ProduceCall): Promise<string[]>;
}

/** A synchronous invocation of the batch-host function. */
export function lambdaTransport(
  client: Pick<LambdaClient, 'send'>,
  functionName: string,
): BatchHostTransport {
  return async (request) => {
    const out = await client.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: 'RequestResponse',
        Payload: new TextEncoder().encode(JSON.stringify(request)),
      }),
    );
    if (out.FunctionError || !out.Payload) {
      return {
        ok: false,
        error: { name: 'backend_unavailable', message: 'the Host could not complete the call' },
      };
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

/** A BatchHostPort over `transport`. */
export function remoteBatchHost(transport: BatchHostTransport): RemoteBatchHost {
  const call = async <T>(request: BatchHostRequest, kind: ErrorKind): Promise<T> => {
    let answer: BatchHostResponse;
    try {
      answer = await transport(request);
    } catch {
      throw rebuild({ name: 'backend_unavailable' }, kind === 'runner' ? 'settle' : kind);
    }
    if (!answer.ok) throw rebuild(answer.error, kind);
    return answer.value as T;
  };

  /** Dead-letter moves carry bodies: split them so no call exceeds the payload limit. */
  const deadLetterCalls = (items: DeadLetterItem[]) => {
    const parts: ReturnType<typeof wireItem>[][] = [[]];
    let bytes = 0;
    for (const item of items) {
      const w = wireItem(item);
      const size = serializedSize(w);
      const current = parts[parts.length - 1] as ReturnType<typeof wireItem>[];
      if (current.length > 0 && bytes + size > PAYLOAD_LIMIT_BYTES - 100_000) {
        parts.push([w]);
        bytes = size;
      } else {
        current.push(w);
        bytes += size;
      }
    }
    return parts;
  };

  return {
    acquire: (previous, credential, evidence) =>
      call<AcquireResult>(
        { action: 'acquire', previous, credential, ...(evidence ? { evidence } : {}) },
        'runner',
      ),
    register: (slot, received) => call<Registration>({ action: 'register', slot, received }, 'runner'),
    settle: async (batchId, credential, settleCall) => {
      await call({ action: 'settle', batchId, credential, call: settleCall }, 'settle');
    },
    finalize: (slot, credential, outcome) =>
      call<{ deadLetter: string[] }>({ action: 'finalize', slot, credential, outcome }, 'runner'),
    deadLetter: async (slot, credential, items) => {
      // The batch is finished (slot released) only by the last part.
      const parts = deadLetterCalls(items);
      for (const [i, part] of parts.entries()) {
        await call(
          { action: 'deadLetter', slot, credential, items: part, last: i === parts.length - 1 },
          'runner',
        );
      }
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
