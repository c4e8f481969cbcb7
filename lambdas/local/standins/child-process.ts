import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { createInterface } from 'node:readline';

/** A server process this Host started; it is stopped only by its own PID. */
export interface StandIn {
  readonly name: string;
  readonly endpoint: string;
  readonly pid: number;
  /** Resolves when the process has exited (for any reason). */
  readonly exited: Promise<number | null>;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * Spawns a stand-in whose standard input is a pipe held by this process: the stand-ins exit
 * when it closes, so they never outlive the Host, even after SIGKILL.
 */
export function spawnStandIn(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { child: ChildProcess; exited: Promise<number | null>; stderrTail: () => string } {
  // Own process group: a terminal's Ctrl-C reaches only the Host, which then stops its stand-ins
  // in order instead of having them vanish underneath running work.
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env, detached: true });
  let tail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(null));
  });
  return { child, exited, stderrTail: () => tail };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopChild(
  child: ChildProcess,
  exited: Promise<unknown>,
  graceMs = 5000,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

function portOf(line: string, prefix: string): number | undefined {
  if (!line.startsWith(prefix)) return undefined;
  try {
    const { port } = JSON.parse(line.slice(prefix.length)) as { port?: unknown };
    return typeof port === 'number' && Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits for the line a stand-in prints once it listens, `<prefix>{"port":N}`, and returns N.
 * Only the process itself can print it, so a port another process answers on is never taken
 * for the stand-in's (a probe of the port could not tell them apart). Other output is skipped.
 * On exit or timeout the child is stopped and the error carries its last standard error.
 */
export async function readyPort(
  what: string,
  spawned: { child: ChildProcess; exited: Promise<unknown>; stderrTail: () => string },
  opts: { prefix?: string; timeoutMs: number },
): Promise<number> {
  const { child, exited, stderrTail } = spawned;
  const prefix = opts.prefix ?? '';
  const lines = createInterface({ input: child.stdout! });
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const exitedEarly = () => new Error(`${what} exited during start-up:\n${stderrTail()}`);
  const ready = (async () => {
    for await (const line of lines) {
      const port = portOf(line, prefix);
      if (port !== undefined) return port;
    }
    // Its output closes as it exits: report the exit, with what it said on the way out.
    await exited;
    throw exitedEarly();
  })();
  const died = exited.then(() => {
    throw exitedEarly();
  });
  const late = once(timeout, 'abort').then(() => {
    throw new Error(`${what} was not ready after ${opts.timeoutMs} ms:\n${stderrTail()}`);
  });
  // Only the first outcome matters; the others must not surface later as unhandled rejections.
  for (const p of [ready, died, late]) p.catch(() => {});
  try {
    const port = await Promise.race([ready, died, late]);
    // Keep draining its output, so a chatty stand-in never blocks on a full pipe.
    lines.on('line', () => {});
    return port;
  } catch (err) {
    lines.close();
    await stopChild(child, exited);
    throw err;
  }
}

export async function waitUntil(
  what: string,
  probe: () => Promise<boolean>,
  opts: { timeoutMs: number; exited: Promise<unknown>; diagnostics: () => string },
): Promise<void> {
  let dead = false;
  void opts.exited.then(() => {
    dead = true;
  });
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    if (dead) throw new Error(`${what} exited during start-up:\n${opts.diagnostics()}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) {
      throw new Error(`${what} was not ready after ${opts.timeoutMs} ms:\n${opts.diagnostics()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
