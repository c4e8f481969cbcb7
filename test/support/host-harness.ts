import { randomBytes, randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { createHostTable } from '../../lambdas/adapters/aws/create-host-table.ts';
import { composeHost } from '../../lambdas/composition/compose-host.ts';
import type { LaneLauncher } from '../../lambdas/delivery/control-loop.ts';
import { type Access, hashApiKey, StaticKeyAuthenticator } from '../../lambdas/engine/auth.ts';
import type { WorkerCode, WorkerRegistry } from '../../lambdas/forms/module-worker/worker-registry.ts';
import { API_ROOT } from '../../lambdas/http/origin.ts';
import type { HttpResponse } from '../../lambdas/http/types.ts';
import {
  localDynamoDbClient as dynamoDbClient,
  localSqsClient as sqsClient,
} from '../../lambdas/local/faults/faulty-clients.ts';
import { standInOldestAge } from '../../lambdas/local/standins/sqs-queue-age.ts';

export const FORMS = {
  moduleWorker: 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/',
  queue: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
  consumer: 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/',
} as const;

/** Worker code the tests control: (space/name) -> handlers. */
export class FakeWorkerRegistry implements WorkerRegistry {
  readonly code = new Map<string, WorkerCode>();
  set(space: string, name: string, handlers: WorkerCode['handlers'] = ['queue']): void {
    this.code.set(`${space}/${name}`, { deploymentUid: `dep-${space}-${name}`, handlers });
  }
  async lookup(space: string, name: string): Promise<WorkerCode | undefined> {
    return this.code.get(`${space}/${name}`);
  }
}

export interface TestPrincipal {
  id: string;
  token: string;
  spaces: Record<string, Access>;
}

export interface ParsedResponse {
  status: number;
  headers: Record<string, string>;
  body: any;
}

export interface RequestOptions {
  method?: string;
  path: string;
  query?: string;
  as?: TestPrincipal | null;
  headers?: Record<string, string | string[]>;
  body?: unknown;
  rawBody?: string | Uint8Array;
}

/**
 * A Host composed in-process over a fresh table on the shared DynamoDB Local: the same HTTP core,
 * engine and store as production, with requests passed straight to the core (no socket).
 */
export async function createTestHost(
  opts: {
    origin?: string;
    principals?: TestPrincipal[];
    clock?: () => number;
    delivery?: {
      workerTimeoutMs?: number;
      graceMs?: number;
      idleWaitSeconds?: number;
      slotsPerShard?: number;
      shardsPerGroup?: number;
      deferAfterMs?: number;
    };
    /** Starts dispatcher lanes; with one, sends through the Host wake their consumer. */
    lanes?: LaneLauncher;
    /** Another DynamoDB endpoint than the suite's (e.g. a physics proxy in front of it). */
    ddbEndpoint?: string;
  } = {},
) {
  const dynamodb = dynamoDbClient(opts.ddbEndpoint ?? inject('ddbEndpoint'));
  const tableName = `t-${randomUUID()}`;
  await createHostTable(dynamodb, tableName);
  const principals = opts.principals ?? [
    {
      id: 'alice',
      token: `alice-${randomBytes(24).toString('hex')}`,
      spaces: { team: 'write', shared: 'read' },
    },
    { id: 'bob', token: `bob-${randomBytes(24).toString('hex')}`, spaces: { team: 'write', other: 'write' } },
    { id: 'reader', token: `reader-${randomBytes(24).toString('hex')}`, spaces: { team: 'read' } },
  ];
  const auth = new StaticKeyAuthenticator(
    principals.map((p) => ({ keyHash: hashApiKey(p.token), principal: p.id, spaces: p.spaces })),
  );
  const workers = new FakeWorkerRegistry();
  const sqs = sqsClient(inject('sqsEndpoint'));
  const queueNamePrefix = `t${randomBytes(4).toString('hex')}-`;
  const origin = opts.origin ?? 'https://host.test';
  const accepted: string[] = [];
  const host = composeHost({
    dynamodb,
    tableName,
    sqs,
    queueNamePrefix,
    workers,
    authenticator: auth,
    cursorKey: randomBytes(32),
    origin: () => origin,
    onAccepted: (id) => accepted.push(id),
    oldestMessageAgeSeconds: standInOldestAge(() => inject('sqsEndpoint')),
    ...(opts.lanes ? { lanes: opts.lanes } : {}),
    ...(opts.clock ? { clock: opts.clock } : {}),
    delivery: {
      workerTimeoutMs: opts.delivery?.workerTimeoutMs ?? 30_000,
      credentialKey: randomBytes(32),
      workerFunction: async (space, name) => ((await workers.lookup(space, name)) ? 'test' : undefined),
      graceMs: opts.delivery?.graceMs ?? 2_000,
      idleWaitSeconds: opts.delivery?.idleWaitSeconds ?? 1,
      ...(opts.delivery?.slotsPerShard ? { slotsPerShard: opts.delivery.slotsPerShard } : {}),
      ...(opts.delivery?.shardsPerGroup ? { shardsPerGroup: opts.delivery.shardsPerGroup } : {}),
      ...(opts.delivery?.deferAfterMs ? { deferAfterMs: opts.delivery.deferAfterMs } : {}),
    },
  });
  const byId = Object.fromEntries(principals.map((p) => [p.id, p])) as Record<string, TestPrincipal>;
  const defaultPrincipal = principals[0] as TestPrincipal;

  async function request(r: RequestOptions): Promise<ParsedResponse> {
    const headers: Record<string, string[]> = {};
    const who = r.as === undefined ? defaultPrincipal : r.as;
    if (who) headers.authorization = [`Bearer ${who.token}`];
    let body: Uint8Array | undefined;
    if (r.rawBody !== undefined) {
      body = typeof r.rawBody === 'string' ? new TextEncoder().encode(r.rawBody) : r.rawBody;
    } else if (r.body !== undefined) {
      body = new TextEncoder().encode(JSON.stringify(r.body));
      headers['content-type'] = ['application/json'];
    }
    for (const [k, v] of Object.entries(r.headers ?? {}))
      headers[k.toLowerCase()] = Array.isArray(v) ? v : [v];
    const path =
      r.path.startsWith('/.well-known') ||
      r.path.startsWith('/docs') ||
      r.path.startsWith('/ext/') ||
      r.path === '/healthz'
        ? r.path
        : `${API_ROOT}${r.path}`;
    const out: HttpResponse = await host.http({
      method: r.method ?? 'GET',
      path,
      rawQuery: r.query ?? '',
      headers,
      body,
    });
    return { status: out.status, headers: out.headers, body: out.body ? JSON.parse(out.body) : undefined };
  }

  const newKey = () => `key-${randomUUID()}`;

  async function create(
    body: { form: string; space: string; name: string; spec: unknown },
    as?: TestPrincipal,
    key = newKey(),
  ) {
    return request({ method: 'POST', path: '/resources', body, as, headers: { 'idempotency-key': key } });
  }

  /** Runs the executor until no Operation is due (bounded). */
  async function settle(rounds = 50): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      if ((await host.executor.runDue()) === 0) return;
    }
  }

  return {
    ...host,
    tableName,
    dynamodb,
    sqs,
    queueNamePrefix,
    workers,
    principals: byId,
    request,
    create,
    settle,
    newKey,
    accepted,
    origin,
  };
}

export type TestHost = Awaited<ReturnType<typeof createTestHost>>;
