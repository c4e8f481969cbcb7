/**
 * A worker's secrets resolved at cold start (worker-secrets.ts): read once per sandbox from
 * Secrets Manager or SSM, given to the handler as `env.<NAME>`, never logged; an unreadable
 * secret fails the invocation before anything is received, and the next invocation tries again.
 * The clients are stand-ins that answer in process; the fault is injected in them.
 */
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { describe, expect, it, vi } from 'vitest';
import { AWS_ENV } from '../../../lambdas/shared/aws-env.ts';
import {
  createQueueWorkerHandler,
  type QueueWorkerRuntime,
  workerConfigFromEnv,
} from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import type { SecretRefs } from '../../../lambdas/worker-runtime/secret-refs.ts';
import { createWorkerEnv } from '../../../lambdas/worker-runtime/worker-env.ts';
import {
  resolveSecrets,
  type SecretClients,
  secretsOnce,
  WorkerSecretUnavailable,
} from '../../../lambdas/worker-runtime/worker-secrets.ts';

const SECRET_ARN = 'arn:aws:secretsmanager:us-east-1:111111111111:secret:db-AbCdEf';
const REFS: SecretRefs = {
  DB_PASSWORD: { secretsManager: SECRET_ARN },
  API_KEY: { ssmParameter: '/orders/api-key' },
};
const VALUES = { DB_PASSWORD: 'pw-7f3a9c', API_KEY: 'key-b81d22' };

/** Clients answering from VALUES; `fail` makes Secrets Manager throw the given error first. */
function clients(fail: Error[] = []) {
  const calls: { service: string; input: unknown }[] = [];
  const secretsManager = {
    send: vi.fn(async (command: unknown) => {
      if (!(command instanceof GetSecretValueCommand)) throw new Error('unexpected command');
      calls.push({ service: 'secretsmanager', input: command.input });
      const fault = fail.shift();
      if (fault) throw fault;
      return { SecretString: VALUES.DB_PASSWORD };
    }),
  };
  const ssm = {
    send: vi.fn(async (command: unknown) => {
      if (!(command instanceof GetParameterCommand)) throw new Error('unexpected command');
      calls.push({ service: 'ssm', input: command.input });
      return { Parameter: { Value: VALUES.API_KEY } };
    }),
  };
  const c = { secretsManager: () => secretsManager, ssm: () => ssm } as unknown as SecretClients;
  return { clients: c, calls };
}

const accessDenied = () =>
  Object.assign(new Error(`User is not authorized to read ${SECRET_ARN}`), { name: 'AccessDeniedException' });

describe('worker secrets: resolution', () => {
  it('reads a Secrets Manager secret by ARN and an SSM parameter with decryption', async () => {
    const { clients: c, calls } = clients();
    expect(await resolveSecrets(REFS, c)).toEqual(VALUES);
    expect(calls).toEqual([
      { service: 'secretsmanager', input: { SecretId: SECRET_ARN } },
      { service: 'ssm', input: { Name: '/orders/api-key', WithDecryption: true } },
    ]);
  });

  it('resolves once per sandbox; a failed resolution is not kept, and its error names the secret and the error only', async () => {
    const { clients: c, calls } = clients([accessDenied()]);
    const get = secretsOnce(REFS, () => c);
    const failure = await get().then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(failure).toBeInstanceOf(WorkerSecretUnavailable);
    expect(failure?.message).toBe(
      'secret DB_PASSWORD (Secrets Manager secret) could not be read: AccessDeniedException',
    );
    expect(await get()).toEqual(VALUES);
    expect(await get()).toEqual(VALUES);
    // One failed try plus one successful read of each: the third call read nothing.
    expect(calls.map((x) => x.service).sort()).toEqual(['secretsmanager', 'secretsmanager', 'ssm', 'ssm']);
  });

  it('a secret without a string value is refused, not given as undefined', async () => {
    const c = {
      secretsManager: () => ({ send: async () => ({ SecretBinary: new Uint8Array([1]) }) }),
      ssm: () => ({ send: async () => ({}) }),
    } as unknown as SecretClients;
    await expect(resolveSecrets({ BIN: { secretsManager: SECRET_ARN } }, c)).rejects.toThrow(
      'secret BIN (Secrets Manager secret) has no string value',
    );
    await expect(resolveSecrets({ P: { ssmParameter: '/p' } }, c)).rejects.toThrow(
      'secret P (SSM parameter) has no string value',
    );
  });

  it('reads the references from the function environment and refuses malformed ones', () => {
    const env = { [AWS_ENV.workerConfig]: JSON.stringify({ vars: {}, secrets: REFS }) };
    expect(workerConfigFromEnv(env).secrets).toEqual(REFS);
    const bad = { [AWS_ENV.workerConfig]: JSON.stringify({ secrets: { lower: { ssmParameter: '/p' } } }) };
    expect(() => workerConfigFromEnv(bad)).toThrow();
    const both = { [AWS_ENV.workerConfig]: JSON.stringify({ secrets: { A: { ssmParameter: '/p', x: 1 } } }) };
    expect(() => workerConfigFromEnv(both)).toThrow();
  });
});

describe('worker secrets: in env (MW-03)', () => {
  it('env holds the secrets as strings beside vars and bindings; a name given twice throws', () => {
    const env = createWorkerEnv({
      vars: { region: 'eu' },
      secrets: VALUES,
      producerBindings: ['OUT'],
      produce: async () => [],
    });
    expect(Object.keys(env).sort()).toEqual(['API_KEY', 'DB_PASSWORD', 'OUT', 'region']);
    expect(env.DB_PASSWORD).toBe(VALUES.DB_PASSWORD);
    expect(Object.isFrozen(env)).toBe(true);
    expect(() =>
      createWorkerEnv({
        vars: { API_KEY: 1 },
        secrets: VALUES,
        producerBindings: [],
        produce: async () => [],
      }),
    ).toThrow(/"API_KEY" is declared twice/);
  });
});

describe('worker secrets: a failing resolve fails the invocation', () => {
  it('never receives, registers or runs the handler without its secrets, and logs no value', async () => {
    const { clients: c } = clients([accessDenied()]);
    const queue = vi.fn();
    const sqs = { send: vi.fn() };
    const host = vi.fn();
    const log = vi.fn();
    const runtime = {
      sqs,
      host,
      idleWaitSeconds: 0,
      secretClients: c,
      log,
      exit: () => {},
    } as unknown as QueueWorkerRuntime;
    const handler = createQueueWorkerHandler({ queue }, { vars: {}, secrets: REFS }, runtime);
    const event = {
      kind: 'takoform.queue-batch.v1',
      slot: {
        batchId: 'b-1',
        consumerUid: 'r-consumer',
        generation: 1,
        queueUid: 'r-queue',
        queueName: 'orders',
        sqsUrl: 'http://127.0.0.1:1/000000000000/q',
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 0,
        deadline: Date.now() + 60_000,
        invisibleUntil: Date.now() + 60_000,
        workerUid: 'r-worker',
        workerSpace: 'team',
        workerName: 'orders',
        workerFunction: 'fn',
        maxConcurrency: 1,
        maxRetries: 3,
        retryDelaySeconds: 0,
        handlerMs: 60_000,
        seal: 'sealed-by-the-host',
      },
    };
    const context = { getRemainingTimeInMillis: () => 60_000 };
    const err = await handler(event, context).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    // An event this test cannot shape would fail earlier, at parsing: make sure it is the secret.
    expect(err?.name).toBe('WorkerSecretUnavailable');
    expect(err?.message).toContain('DB_PASSWORD');
    expect(queue).not.toHaveBeenCalled();
    expect(sqs.send).not.toHaveBeenCalled();
    expect(host).not.toHaveBeenCalled();
    const logged = JSON.stringify(log.mock.calls);
    for (const value of Object.values(VALUES)) expect(logged).not.toContain(value);
  });
});
