/**
 * A worker's secrets on AWS: `ModuleWorkerFunction`'s `secrets` prop puts only references into
 * the function's environment (a Secrets Manager secret's ARN, an SSM parameter's name); the
 * values are read here, once per sandbox, and reach the handler as `env.<NAME>` strings, like a
 * ModuleWorker's sensitive vars (spec: set by the Host out of band). A value is never logged, and
 * an error names the secret and the error's name only.
 */
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import type { SecretRef, SecretRefs } from './secret-refs.ts';

/** The clients a resolution may use; only the one a reference needs is created. */
export interface SecretClients {
  secretsManager: () => Pick<SecretsManagerClient, 'send'>;
  ssm: () => Pick<SSMClient, 'send'>;
}

/** A secret could not be read: the invocation fails before any message is received. */
export class WorkerSecretUnavailable extends Error {
  override readonly name = 'WorkerSecretUnavailable';
}

const errorName = (err: unknown): string => (err instanceof Error ? err.name : typeof err);

async function readOne(name: string, ref: SecretRef, clients: SecretClients): Promise<string> {
  let value: string | undefined;
  const source = 'secretsManager' in ref ? 'Secrets Manager secret' : 'SSM parameter';
  try {
    if ('secretsManager' in ref) {
      const out = await clients
        .secretsManager()
        .send(new GetSecretValueCommand({ SecretId: ref.secretsManager }));
      value = out.SecretString;
    } else {
      const out = await clients
        .ssm()
        .send(new GetParameterCommand({ Name: ref.ssmParameter, WithDecryption: true }));
      value = out.Parameter?.Value;
    }
  } catch (err) {
    throw new WorkerSecretUnavailable(`secret ${name} (${source}) could not be read: ${errorName(err)}`);
  }
  if (typeof value !== 'string') {
    throw new WorkerSecretUnavailable(`secret ${name} (${source}) has no string value`);
  }
  return value;
}

/** Every secret's value, read in parallel; the first failure rejects the whole resolution. */
export async function resolveSecrets(
  refs: SecretRefs,
  clients: SecretClients,
): Promise<Readonly<Record<string, string>>> {
  const entries = await Promise.all(
    Object.entries(refs).map(async ([name, ref]) => [name, await readOne(name, ref, clients)] as const),
  );
  return Object.freeze(Object.fromEntries(entries));
}

/**
 * `resolveSecrets` once per sandbox: later invocations reuse the values. A failed resolution is
 * not kept, so the next invocation tries again (a grant or a parameter may be fixed meanwhile).
 */
export function secretsOnce(
  refs: SecretRefs,
  clients: () => SecretClients,
): () => Promise<Readonly<Record<string, string>>> {
  let pending: Promise<Readonly<Record<string, string>>> | undefined;
  return () => {
    if (Object.keys(refs).length === 0) return Promise.resolve({});
    pending ??= resolveSecrets(refs, clients()).catch((err: unknown) => {
      pending = undefined;
      throw err;
    });
    return pending;
  };
}
