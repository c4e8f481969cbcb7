import { type AttributeValue, type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { z } from 'zod';
import type { HandlerName, WorkerCode, WorkerRegistry } from '../../forms/module-worker/worker-registry.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

/**
 * Worker registrations on AWS: one item per (space, name), written at deploy time by the
 * ModuleWorkerFunction construct (a custom resource PutItem) and deleted with its stack.
 *
 * Item: `pk = WORKER#<space>#<name>`, `sk = _`, and the attributes below. `vars` and
 * `queueProducers` are JSON strings so that CloudFormation tokens inside them resolve as text.
 */
export const workerRegistrationKey = (space: string, name: string) => ({
  [TABLE_KEYS.pk]: `WORKER#${space}#${name}`,
  [TABLE_KEYS.sk]: '_',
});

export const REGISTRATION_ATTRIBUTES = {
  space: 'space',
  name: 'name',
  functionArn: 'functionArn',
  handlers: 'handlers',
  varsJson: 'varsJson',
  queueProducersJson: 'queueProducersJson',
  deploymentUid: 'deploymentUid',
  timeoutSeconds: 'timeoutSeconds',
} as const;

export interface WorkerRegistration {
  space: string;
  name: string;
  /** The Lambda function that runs the worker's code. */
  functionArn: string;
  /** The callable own properties of the module's default export among fetch/scheduled/queue. */
  handlers: HandlerName[];
  vars: Record<string, unknown>;
  /** Binding name → the queue Resource (by name, same Space) it sends to. */
  queueProducers: Record<string, { queue: string }>;
  /** Changes exactly when the code asset or the configuration changes. */
  deploymentUid: string;
  /**
   * The function's own timeout in seconds (how long one invocation can last); absent in
   * registrations written before it was recorded, which then use the Host's bound.
   */
  timeoutSeconds?: number;
}

const producersSchema = z.record(z.string(), z.strictObject({ queue: z.string().min(1) }));
const handlersSchema = z.array(z.enum(['fetch', 'scheduled', 'queue']));

/** The DynamoDB item of a registration (attribute values may be CloudFormation tokens). */
export function registrationItem(r: {
  space: string;
  name: string;
  functionArn: string;
  handlers: readonly string[];
  varsJson: string;
  queueProducersJson: string;
  deploymentUid: string;
  /** A number or its CloudFormation token rendered as text. */
  timeoutSeconds?: number | string;
}): Record<string, AttributeValue> {
  const key = workerRegistrationKey(r.space, r.name);
  const a = REGISTRATION_ATTRIBUTES;
  return {
    [TABLE_KEYS.pk]: { S: key[TABLE_KEYS.pk] as string },
    [TABLE_KEYS.sk]: { S: '_' },
    [a.space]: { S: r.space },
    [a.name]: { S: r.name },
    [a.functionArn]: { S: r.functionArn },
    [a.handlers]: { L: r.handlers.map((h) => ({ S: h })) },
    [a.varsJson]: { S: r.varsJson },
    [a.queueProducersJson]: { S: r.queueProducersJson },
    [a.deploymentUid]: { S: r.deploymentUid },
    ...(r.timeoutSeconds !== undefined ? { [a.timeoutSeconds]: { N: String(r.timeoutSeconds) } } : {}),
  };
}

/** Lambda's bound on one invocation: a recorded timeout outside 1..900 s is malformed. */
const timeoutSchema = z.coerce.number().int().min(1).max(900);

/** Reads registrations; a malformed one counts as absent (the worker is then not `ready`). */
export class DynamoWorkerRegistry implements WorkerRegistry {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  async registration(space: string, name: string): Promise<WorkerRegistration | undefined> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: {
          [TABLE_KEYS.pk]: { S: `WORKER#${space}#${name}` },
          [TABLE_KEYS.sk]: { S: '_' },
        },
        ConsistentRead: true,
      }),
    );
    const item = out.Item;
    if (!item) return undefined;
    const a = REGISTRATION_ATTRIBUTES;
    try {
      const functionArn = item[a.functionArn]?.S;
      const deploymentUid = item[a.deploymentUid]?.S;
      if (!functionArn || !deploymentUid) return undefined;
      const handlers = handlersSchema.parse((item[a.handlers]?.L ?? []).map((v) => v.S));
      const vars = z.record(z.string(), z.unknown()).parse(JSON.parse(item[a.varsJson]?.S ?? '{}'));
      const queueProducers = producersSchema.parse(JSON.parse(item[a.queueProducersJson]?.S ?? '{}'));
      const timeout = item[a.timeoutSeconds]?.N;
      return {
        space,
        name,
        functionArn,
        handlers,
        vars,
        queueProducers,
        deploymentUid,
        ...(timeout !== undefined ? { timeoutSeconds: timeoutSchema.parse(timeout) } : {}),
      };
    } catch {
      return undefined;
    }
  }

  async lookup(space: string, name: string): Promise<WorkerCode | undefined> {
    const r = await this.registration(space, name);
    return r ? { deploymentUid: r.deploymentUid, handlers: r.handlers } : undefined;
  }

  /** Where (space, name)'s code runs: its function ARN, or undefined without a registration. */
  async functionArn(space: string, name: string): Promise<string | undefined> {
    return (await this.registration(space, name))?.functionArn;
  }

  /** How long one invocation of (space, name)'s function can last, when its registration says. */
  async timeoutMs(space: string, name: string): Promise<number | undefined> {
    const seconds = (await this.registration(space, name))?.timeoutSeconds;
    return seconds === undefined ? undefined : seconds * 1000;
  }
}
