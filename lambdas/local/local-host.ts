import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createHostTable } from '../adapters/aws/create-host-table.ts';
import { sqsMessageQueue } from '../adapters/aws/sqs-message-queue.ts';
import { composeHost } from '../composition/compose-host.ts';
import { directBatchHost } from '../delivery/direct-batch-host.ts';
import { type Authenticator, hashApiKey, StaticKeyAuthenticator } from '../engine/auth.ts';
import { type LocalHttpServer, startNodeServer } from '../http/node-server.ts';
import { API_ROOT } from '../http/origin.ts';
import { parseStrictJson } from '../http/strict-json.ts';
import { QueueHistory } from '../operator/queue-history.ts';
import { log } from '../shared/log.ts';
import { ConfigError, type LocalHostConfig } from './config.ts';
import { DataDir } from './data-dir.ts';
import { deliveryTuning, serviceTuning } from './delivery-tuning.ts';
import { ExecutorLoop } from './executor-loop.ts';
import { armCrashAt } from './faults/crash-at.ts';
import { faultConfigFromEnv, lambdaCutOffFrom } from './faults/fault-config.ts';
import { localDynamoDbClient, localSqsClient } from './faults/faulty-clients.ts';
import { localInvoker } from './lanes/local-invoker.ts';
import { LocalLanes } from './lanes/local-lanes.ts';
import { LocalSupervisor } from './lanes/local-supervisor.ts';
import type { Periodic } from './periodic.ts';
import { QueueHistorySampler } from './queue-history-sampler.ts';
import { localResourceRefresh } from './resource-refresh.ts';
import { startDynamoDbLocal } from './standins/dynamodb-local.ts';
import { standInOldestAge } from './standins/sqs-queue-age.ts';
import { startSqsServer } from './standins/sqs-server.ts';
import { SupervisedStandIn } from './standins/supervised.ts';
import { retriedAtStartUp } from './start-up-retry.ts';
import { LocalWorkerRegistry } from './workers/local-worker-registry.ts';
import { WorkerPool } from './workers/worker-pool.ts';

export const LOCAL_TABLE = 'takoform-host';

function loadAuthenticator(config: LocalHostConfig, dir: DataDir): { auth: Authenticator; devKey?: string } {
  if (config.principalsFile) {
    let parsed: unknown;
    try {
      parsed = parseStrictJson(readFileSync(config.principalsFile));
    } catch (err) {
      throw new ConfigError(
        `--principals ${config.principalsFile}: not readable strict JSON (${(err as Error).message})`,
      );
    }
    return { auth: StaticKeyAuthenticator.fromPrincipalsFile(parsed) };
  }
  const devKey = dir.devApiKey();
  return {
    auth: new StaticKeyAuthenticator([
      { keyHash: hashApiKey(devKey), principal: 'dev', spaces: { default: 'write' } },
    ]),
    devKey,
  };
}

/** The HMAC key for list cursors, made once per data folder. */
function cursorKey(dir: DataDir): Buffer {
  return secretOf(dir, 'cursor-key');
}

/** A 32-byte key kept in the data folder (mode 0600), made on first use. */
function secretOf(dir: DataDir, name: string): Buffer {
  const file = dir.path(name);
  try {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url');
    if (key.length >= 32) return key;
  } catch {
    // made below
  }
  const key = randomBytes(32);
  writeFileSync(file, key.toString('base64url'), { mode: 0o600 });
  return key;
}

/**
 * TAKOFORM_OPERATION_LEASE_MS: how long an executor's claim on an Operation lasts (default 60 s).
 * Restart tests shorten it so that a claim left by a crashed Host runs out quickly.
 */
export function operationLeaseMs(env: NodeJS.ProcessEnv): number | undefined {
  const raw = env.TAKOFORM_OPERATION_LEASE_MS;
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < 1000 || Number(raw) > 600_000) {
    throw new ConfigError(
      `TAKOFORM_OPERATION_LEASE_MS must be an integer in 1000..600000, got ${JSON.stringify(raw)}`,
    );
  }
  return Number(raw);
}

export interface RunningHost {
  readonly origin: string;
  readonly baseUrl: string;
  readonly dataDir: string;
  readonly apiKey: string | undefined;
  readonly endpoints: { dynamodb: string; sqs: string };
  /** Resolves when the Host must stop because a part of it cannot be kept running. */
  readonly standInDied: Promise<string>;
  stop(): Promise<void>;
}

/** Starts the whole Host on this machine: stand-ins, the HTTP core and background work. */
export async function startLocalHost(config: LocalHostConfig): Promise<RunningHost> {
  armCrashAt(process.env);
  const leaseMs = operationLeaseMs(process.env);
  const dir = await DataDir.claim(config.dataDir);
  const standIns: SupervisedStandIn[] = [];
  let server: LocalHttpServer | undefined;
  let loop: ExecutorLoop | undefined;
  let supervisor: LocalSupervisor | undefined;
  let sampler: QueueHistorySampler | undefined;
  let refresh: Periodic | undefined;
  const lanes = new LocalLanes();
  let pool: WorkerPool | undefined;
  const stop = async () => {
    await server?.close();
    await loop?.stop();
    await supervisor?.stop();
    await sampler?.stop();
    await refresh?.stop();
    // In-flight batches get a bound to finish; what is cut off is retried, never acknowledged,
    // and what is still unfinished then is recovered by the next start.
    await lanes.stop(5_000, async () => pool?.close());
    await pool?.close();
    await Promise.all(standIns.map((s) => s.stop()));
    dir.release();
  };
  try {
    const record = () =>
      dir.recordStandIns(
        standIns.map((x) => ({ pid: x.pid, marker: dir.path(x.name === 'sqs' ? 'sqs' : 'dynamodb') })),
      );
    const [ddb, sqs] = await Promise.all([
      SupervisedStandIn.start((port) => startDynamoDbLocal({ dbPath: dir.path('dynamodb'), port }), record),
      SupervisedStandIn.start((port) => startSqsServer({ dataDir: dir.path('sqs'), port }), record),
    ]);
    standIns.push(ddb, sqs);
    record();
    // Stand-ins that die are restarted by their supervisors; the Host keeps running (RC-04).
    const standInDied = new Promise<string>(() => {});

    const { auth, devKey } = loadAuthenticator(config, dir);
    const dynamodb = localDynamoDbClient(ddb.endpoint);
    await createHostTable(dynamodb, LOCAL_TABLE);
    let origin = config.publicOrigin ?? '';
    const workers = new LocalWorkerRegistry(config.workersDir);
    const delivery = deliveryTuning(process.env, config.workerTimeoutSeconds);
    const history = new QueueHistory(delivery.historySeconds);
    const host = composeHost({
      dynamodb,
      tableName: LOCAL_TABLE,
      sqs: localSqsClient(sqs.endpoint),
      queueNamePrefix: 'takoform-',
      workers,
      authenticator: auth,
      cursorKey: cursorKey(dir),
      origin: () => origin,
      onAccepted: () => loop?.poke(),
      oldestMessageAgeSeconds: standInOldestAge(() => sqs.endpoint),
      lanes,
      history,
      operationLeaseMs: leaseMs,
      delivery: {
        workerTimeoutMs: config.workerTimeoutSeconds * 1000,
        credentialKey: secretOf(dir, 'delivery-key'),
        // Local workers run in this process's worker threads, whatever their Space.
        workerFunction: async (space, name) =>
          (await workers.moduleFile(space, name)) ? 'local' : undefined,
        ...serviceTuning(delivery),
      },
    });
    loop = new ExecutorLoop(host.executor);
    // As many threads per worker as the largest maxConcurrency, so DL-02's bound is reachable.
    const workerPool = new WorkerPool({
      timeoutMs: config.workerTimeoutSeconds * 1000,
      maxThreadsPerWorker: 250,
    });
    pool = workerPool;
    const sqsForDelivery = sqsMessageQueue(localSqsClient(sqs.endpoint));
    lanes.attach({
      loop: host.loop,
      host: directBatchHost(host.delivery, host.loop),
      messages: sqsForDelivery,
      idleWaitSeconds: delivery.idleWaitSeconds,
      invokerFor: async (slot, onCutOff) => localInvoker(slot, { workers, pool: workerPool, host }, onCutOff),
      lambdaCutOff: lambdaCutOffFrom(faultConfigFromEnv()),
    });
    supervisor = new LocalSupervisor(
      {
        loop: host.loop,
        attachments: host.attachments,
        queueDirectory: host.queueDirectory,
        messages: sqsForDelivery,
      },
      delivery.supervisorSeconds * 1000,
    );
    // Batches an earlier run left in flight (a stop that ran out of time, `kill -9`) end now:
    // their handlers died with that process, so nothing needs to wait for their deadlines.
    await retriedAtStartUp('recovering the batches an earlier run left', () =>
      host.delivery.recoverAfterRestart(),
    );
    // The same for Operations: a step the dead run had claimed resumes now, not when its lease
    // (60 s by default) runs out.
    const released = await retriedAtStartUp('releasing the Operations an earlier run claimed', () =>
      host.store.releaseLeases(Date.now()),
    );
    if (released > 0)
      log.info('resumed the Operations a previous run left claimed', { operations: released });
    server = await startNodeServer(host.http, config.port);
    origin ||= `http://127.0.0.1:${server.port}`;
    dir.recordConnection({ listen: `http://127.0.0.1:${server.port}`, origin, pid: process.pid });
    sampler = new QueueHistorySampler(
      { history, attachments: host.attachments, stats: (uid) => host.queues.stats(uid) },
      delivery.historySeconds * 1000,
    );
    refresh = localResourceRefresh(host.observer, delivery.observeSeconds * 1000);
    loop.start();
    supervisor.start();
    sampler.start();
    refresh.start();
    const apiKey = devKey;
    return {
      origin,
      baseUrl: `${origin}${API_ROOT}`,
      dataDir: dir.root,
      apiKey,
      endpoints: { dynamodb: ddb.endpoint, sqs: sqs.endpoint },
      standInDied,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
