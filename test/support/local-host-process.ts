/**
 * Runs the embedded local Host (`npm start`, host-profile §2) as a real child process for
 * integration tests, and inspects its process tree and TCP listeners through /proc (Linux).
 *
 * Every process and temporary folder made through `useHostProcesses()` is cleaned up in an
 * `afterEach`/`afterAll` hook. Clean-up signals only PIDs this helper started (the Host child)
 * or saw running under that child (its stand-ins), each re-checked against its recorded start
 * time so a reused PID is never touched.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach } from 'vitest';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MAIN = path.join(REPO_ROOT, 'lambdas/local/main.ts');

export const READY_PREFIX = 'takoform-host ready ';
export const API_ROOT_PATH = '/apis/forms.takoform.com/v2';
export const MODULE_WORKER_FORM = 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/';
/** The smallest Worker module that declares `queue`, which makes a ModuleWorker Resource `ready`. */
export const QUEUE_WORKER_SOURCE = 'export default { async queue() {} };\n';

export interface ReadyLine {
  origin: string;
  baseUrl: string;
  dataDir: string;
  apiKey?: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface StartOptions {
  /** Extra arguments after `--port 0 --data-dir … --workers-dir …`. */
  args?: string[];
  /** Added to the environment (inherited TAKOFORM_* variables are dropped first); undefined removes. */
  env?: Record<string, string | undefined>;
  /** Reuse a data folder (a restart); otherwise a fresh temporary one. */
  dataDir?: string;
  /** Reuse a workers folder; otherwise a fresh temporary one. */
  workersDir?: string;
  readyTimeoutMs?: number;
}

export interface HostProcess {
  /** The parsed `takoform-host ready {json}` line. */
  readonly ready: ReadyLine;
  readonly child: ChildProcess;
  readonly pid: number;
  /** The port the Host's API listener is bound to on 127.0.0.1 (read from /proc, not the ready line). */
  readonly port: number;
  /** `http://127.0.0.1:<port>`: where to send requests whatever origin the Host advertises. */
  readonly loopback: string;
  readonly dataDir: string;
  readonly workersDir: string;
  /** Milliseconds from spawn to the ready line. */
  readonly readyMs: number;
  stdout(): string;
  stderr(): string;
  /** Sends `signal` (default SIGTERM) and waits for the exit (bounded). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<ExitInfo>;
  /** `kill -9` of the Host process only (not its stand-ins), then waits for the exit. */
  kill9(): Promise<ExitInfo>;
  /** Waits for the exit (bounded); rejects after `timeoutMs`. */
  waitExit(timeoutMs?: number): Promise<ExitInfo>;
}

export interface RunResult extends ExitInfo {
  stdout: string;
  stderr: string;
}

// ---------------------------------------------------------------------------------------------
// /proc helpers

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** Single-letter state: R, S, D, Z (zombie), X (dead), … */
  state: string;
  /** Start time in clock ticks since boot: together with the PID it names one process. */
  startTime: string;
  comm: string;
}

/** One process's /proc/<pid>/stat, or undefined when it does not exist (any more). */
export function procInfo(pid: number): ProcInfo | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may contain spaces and parentheses; it ends at the last ')'.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const rest = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3 (state), so field N is rest[N - 3]; starttime is field 22.
  return {
    pid,
    comm: text.slice(open + 1, close),
    state: rest[0] ?? '?',
    ppid: Number(rest[1]),
    startTime: rest[19] ?? '',
  };
}

function allProcesses(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const info = procInfo(Number(entry));
    if (info) out.push(info);
  }
  return out;
}

/** PIDs of every live (non-zombie) descendant of `rootPid`, following the ppid links in /proc/<pid>/stat. */
export function descendantPids(rootPid: number): number[] {
  const children = new Map<number, number[]>();
  for (const p of allProcesses()) {
    if (p.state === 'Z' || p.state === 'X') continue;
    const list = children.get(p.ppid) ?? [];
    list.push(p.pid);
    children.set(p.ppid, list);
  }
  const out: number[] = [];
  const queue = [...(children.get(rootPid) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** True while the process exists and is not a zombie; with `startTime`, only if it is that same process. */
export function isRunning(pid: number, startTime?: string): boolean {
  const info = procInfo(pid);
  if (!info || info.state === 'Z' || info.state === 'X') return false;
  return startTime === undefined || info.startTime === startTime;
}

export interface TcpListener {
  pid: number;
  family: 4 | 6;
  /** Dotted IPv4, `::ffff:a.b.c.d` for v4-mapped IPv6, otherwise the canonical IPv6 text. */
  address: string;
  port: number;
  inode: string;
}

/** Socket inodes open in a process (from its /proc/<pid>/fd links). */
function socketInodes(pid: number): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match?.[1]) out.push(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

/** /proc/net/tcp{,6} store each 32-bit word of the address in host (little-endian) byte order. */
function addressBytes(hex: string): number[] {
  const bytes: number[] = [];
  for (let word = 0; word < hex.length; word += 8) {
    const chunk = hex.slice(word, word + 8);
    for (let i = 6; i >= 0; i -= 2) bytes.push(Number.parseInt(chunk.slice(i, i + 2), 16));
  }
  return bytes;
}

function formatAddress(hex: string): string {
  const b = addressBytes(hex);
  if (b.length === 4) return b.join('.');
  const mapped = b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
  if (mapped) return `::ffff:${b.slice(12).join('.')}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((b[i] ?? 0) << 8) | (b[i + 1] ?? 0)).toString(16));
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/**
 * TCP sockets in LISTEN state held by any of `pids`: /proc/net/tcp and /proc/net/tcp6 give the
 * listening sockets with their inodes, and each PID's /proc/<pid>/fd links say which it holds.
 */
export function tcpListeners(pids: readonly number[]): TcpListener[] {
  const owners = new Map<string, number[]>();
  for (const pid of pids) {
    for (const inode of socketInodes(pid)) owners.set(inode, [...(owners.get(inode) ?? []), pid]);
  }
  const out: TcpListener[] = [];
  for (const [file, family] of [
    ['/proc/net/tcp', 4],
    ['/proc/net/tcp6', 6],
  ] as const) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // e.g. no IPv6 in this kernel
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A') continue; // 0A = TCP_LISTEN
      const [addrHex, portHex] = (f[1] ?? '').split(':');
      const inode = f[9] as string;
      for (const pid of owners.get(inode) ?? []) {
        out.push({
          pid,
          family,
          address: formatAddress(addrHex ?? ''),
          port: Number.parseInt(portHex ?? '', 16),
          inode,
        });
      }
    }
  }
  return out;
}

export function isLoopbackOnly(l: TcpListener): boolean {
  return l.address === '127.0.0.1' || l.address === '::ffff:127.0.0.1';
}

// ---------------------------------------------------------------------------------------------
// Spawning

/** Writes `<workersDir>/<space>/<name>.mjs`. */
export function writeWorker(workersDir: string, space: string, name: string, source = QUEUE_WORKER_SOURCE) {
  mkdirSync(path.join(workersDir, space), { recursive: true });
  writeFileSync(path.join(workersDir, space, `${name}.mjs`), source);
}

function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('TAKOFORM_')) env[k] = v;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

interface Tracked {
  child: ChildProcess;
  exited: Promise<ExitInfo>;
  /** PID → start time of every descendant seen while the Host ran. */
  descendants: Map<number, string>;
}

function exitOf(child: ChildProcess): ExitInfo | undefined {
  return child.exitCode !== null || child.signalCode !== null
    ? { code: child.exitCode, signal: child.signalCode }
    : undefined;
}

async function within<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

function remember(t: Tracked, pid: number): void {
  for (const d of descendantPids(pid)) {
    const info = procInfo(d);
    if (info && !t.descendants.has(d)) t.descendants.set(d, info.startTime);
  }
}

/** Stops what `t` started: the Host child, then any recorded descendant still running (SIGKILL). */
async function reap(t: Tracked): Promise<void> {
  if (!exitOf(t.child) && t.child.pid !== undefined) {
    remember(t, t.child.pid);
    try {
      process.kill(t.child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
    await within('host exit after SIGKILL', t.exited, 10_000).catch(() => undefined);
  }
  for (const [pid, start] of t.descendants) {
    if (isRunning(pid, start)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  const deadline = Date.now() + 10_000;
  while ([...t.descendants].some(([pid, start]) => isRunning(pid, start)) && Date.now() < deadline) {
    await sleep(50);
  }
}

/**
 * Registers clean-up hooks for the current test file (or describe block) and returns functions
 * that start Hosts and make temporary folders. `cleanup: 'afterEach'` stops everything after
 * each test; the default stops it after the block; folders always go in `afterAll`.
 */
export function useHostProcesses(opts: { cleanup?: 'afterEach' | 'afterAll' } = {}) {
  const tracked: Tracked[] = [];
  const dirs: string[] = [];

  const reapAll = async () => {
    const all = tracked.splice(0);
    await Promise.all(all.map(reap));
  };
  if (opts.cleanup === 'afterEach') afterEach(reapAll);
  afterAll(async () => {
    await reapAll();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  function tempDir(prefix = 'takoform-host-'): string {
    const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  }

  function spawnHost(args: string[], env: Record<string, string | undefined> | undefined, cwd: string) {
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd,
      env: childEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', () => resolve({ code: null, signal: null }));
    });
    const t: Tracked = { child, exited, descendants: new Map() };
    tracked.push(t);
    let out = '';
    let err = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      err = (err + chunk).slice(-64_000);
    });
    return { child, exited, t, out: () => out, err: () => err, appendOut: (s: string) => (out += s) };
  }

  /** Runs the Host with exactly `args` (after fresh `--data-dir`/`--workers-dir`) until it exits. */
  async function runToExit(
    args: string[],
    o: { env?: Record<string, string | undefined>; timeoutMs?: number; dataDir?: string } = {},
  ): Promise<RunResult> {
    const scratch = tempDir('takoform-run-');
    const dataDir = o.dataDir ?? path.join(scratch, 'data');
    const workersDir = path.join(scratch, 'workers');
    const s = spawnHost(['--data-dir', dataDir, '--workers-dir', workersDir, ...args], o.env, scratch);
    s.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => s.appendOut(chunk));
    const exit = await within('host run', s.exited, o.timeoutMs ?? 30_000).catch(async (e) => {
      await reap(s.t);
      throw new Error(`${(e as Error).message}; stdout:\n${s.out()}\nstderr:\n${s.err()}`);
    });
    return { ...exit, stdout: s.out(), stderr: s.err() };
  }

  /** Starts a Host on `--port 0` and waits for its ready line (60 s by default). */
  async function start(o: StartOptions = {}): Promise<HostProcess> {
    const dataDir = o.dataDir ?? path.join(tempDir(), 'data');
    const workersDir = o.workersDir ?? path.join(tempDir(), 'workers');
    mkdirSync(workersDir, { recursive: true });
    const readyTimeoutMs = o.readyTimeoutMs ?? 60_000;
    const started = Date.now();
    const s = spawnHost(
      ['--port', '0', '--data-dir', dataDir, '--workers-dir', workersDir, ...(o.args ?? [])],
      o.env,
      path.dirname(dataDir),
    );
    const { child, exited, t } = s;
    const lines = createInterface({ input: child.stdout! });
    const readyLine = new Promise<ReadyLine>((resolve) => {
      lines.on('line', (line) => {
        s.appendOut(`${line}\n`);
        if (line.startsWith(READY_PREFIX)) resolve(JSON.parse(line.slice(READY_PREFIX.length)));
      });
    });
    const diagnostics = () => `\nstdout:\n${s.out()}\nstderr:\n${s.err()}`;
    let ready: ReadyLine;
    try {
      const early = exited.then((e): never => {
        throw new Error(`the Host exited before it was ready (code ${e.code}, signal ${e.signal})`);
      });
      early.catch(() => {});
      ready = await within('the ready line', Promise.race([readyLine, early]), readyTimeoutMs);
    } catch (err) {
      await reap(t);
      throw new Error(`${(err as Error).message}${diagnostics()}`);
    }
    const readyMs = Date.now() - started;
    const pid = child.pid as number;
    remember(t, pid);
    const own = tcpListeners([pid]);
    if (own.length !== 1 || !own[0]) {
      await reap(t);
      throw new Error(`expected exactly one listener of the Host process, found ${JSON.stringify(own)}`);
    }
    const port = own[0].port;

    const waitExit = async (timeoutMs = 30_000) => {
      const done = exitOf(child);
      if (done) return done;
      return within(`exit of Host pid ${pid}`, exited, timeoutMs);
    };
    return {
      ready,
      child,
      pid,
      port,
      loopback: `http://127.0.0.1:${port}`,
      dataDir,
      workersDir,
      readyMs,
      stdout: s.out,
      stderr: s.err,
      waitExit,
      stop: async (signal = 'SIGTERM', timeoutMs = 30_000) => {
        if (!exitOf(child)) {
          remember(t, pid);
          process.kill(pid, signal);
        }
        return waitExit(timeoutMs);
      },
      kill9: async () => {
        if (!exitOf(child)) {
          remember(t, pid);
          process.kill(pid, 'SIGKILL');
        }
        return waitExit(10_000);
      },
    };
  }

  return { start, runToExit, tempDir };
}

/** Waits (bounded) until none of the given processes runs; returns those still running at the deadline. */
export async function waitGone(procs: ReadonlyMap<number, string>, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = [...procs].filter(([pid, start]) => isRunning(pid, start)).map(([pid]) => pid);
    if (left.length === 0 || Date.now() > deadline) return left;
    await sleep(50);
  }
}

/** PID → start time for each current descendant of `pid`. */
export function descendantSnapshot(pid: number): Map<number, string> {
  const out = new Map<number, string>();
  for (const d of descendantPids(pid)) {
    const info = procInfo(d);
    if (info) out.set(d, info.startTime);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A small client for the Host API over real HTTP

/** A parsed JSON body; the tests' assertions check its shape. */
// biome-ignore lint/suspicious/noExplicitAny: JSON read from the Host, checked by each test's assertions
export type JsonBody = any;

export interface ApiReply {
  status: number;
  headers: Headers;
  body: JsonBody;
}

/** Requests against a Host process over 127.0.0.1, authenticated with its development key. */
export function hostClient(host: Pick<HostProcess, 'loopback' | 'ready'>) {
  const auth: Record<string, string> = host.ready.apiKey
    ? { authorization: `Bearer ${host.ready.apiKey}` }
    : {};

  async function request(
    method: string,
    pathUnderRoot: string,
    o: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<ApiReply> {
    const headers: Record<string, string> = { ...auth, ...o.headers };
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${host.loopback}${API_ROOT_PATH}${pathUnderRoot}`, {
      method,
      headers,
      body: o.body === undefined ? undefined : JSON.stringify(o.body),
      redirect: 'manual',
      signal: AbortSignal.timeout(o.timeoutMs ?? 15_000),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  }

  /** Polls an Operation until it is terminal (bounded); returns the last read. */
  async function waitTerminal(id: string, timeoutMs = 20_000): Promise<ApiReply> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await request('GET', `/operations/${id}`);
      if (r.status !== 200 || r.body.status === 'succeeded' || r.body.status === 'failed') return r;
      if (Date.now() > deadline) {
        throw new Error(`Operation ${id} not terminal after ${timeoutMs} ms: ${JSON.stringify(r.body)}`);
      }
      await sleep(100);
    }
  }

  async function listByName(space: string, name: string): Promise<JsonBody[]> {
    const q = new URLSearchParams({ space, name });
    const r = await request('GET', `/resources?${q}`);
    if (r.status !== 200) throw new Error(`list failed: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.items;
  }

  return { request, waitTerminal, listByName };
}
