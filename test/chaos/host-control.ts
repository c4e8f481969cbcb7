/**
 * Drives the local Host (`node lambdas/local/main.ts`) as a child process for the chaos suite:
 * starts incarnations on one data folder (each with its own armed crash point), kills the Host
 * (`kill -9`) or its stand-ins by PID, restarts after every death, and talks to its HTTP API.
 *
 * Only processes this controller started are signalled: the Host child, and stand-ins seen as
 * its descendants, each re-checked against its recorded start time so a reused PID is never hit.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { descendantPids, isRunning, procInfo, tcpListeners } from '../support/local-host-process.ts';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MAIN = path.join(REPO_ROOT, 'lambdas/local/main.ts');
const READY_PREFIX = 'takoform-host ready ';
export const API_ROOT_PATH = '/apis/forms.takoform.com/v2';

export interface Tuning {
  workerTimeoutSeconds: number;
  env: Record<string, string>;
}

/** The timings of every chaos run: recovery after a kill takes seconds, not minutes. */
export const CHAOS_TUNING: Tuning = {
  workerTimeoutSeconds: 2,
  env: {
    TAKOFORM_OPERATION_LEASE_MS: '2000',
    TAKOFORM_DELIVERY_GRACE_MS: '1000',
    TAKOFORM_IDLE_WAIT_SECONDS: '1',
    TAKOFORM_SLOT_MARGIN_MS: '2000',
    // A clock like the others: the supervisor round every 5 s instead of AWS's minute.
    TAKOFORM_SUPERVISOR_SECONDS: '5',
    // Retry delays past a second are deferred (sent again delayed) instead of hidden.
    TAKOFORM_DEFER_AFTER_MS: '1000',
  },
};

/**
 * The local Host's own defaults: nothing shortened (worker timeout 900 s, slot margin 30 s,
 * grace 60 s, idle wait 10 s, operation lease 60 s, supervisor round every 60 s).
 */
/** The armed crash point was reached before the ready line (in start-up recovery). */
class CrashedDuringStart extends Error {
  constructor(arm: string) {
    super(`crash point ${arm} reached during start-up`);
  }
}

export const DEFAULT_TUNING: Tuning = { workerTimeoutSeconds: 900, env: {} };

/**
 * The tuning of one schedule: its timings, plus its AWS faults (TAKOFORM_FAULTS), its slot layout
 * (TAKOFORM_SLOTS_PER_SHARD, TAKOFORM_SHARDS_PER_GROUP) and AWS's throughput physics
 * (TAKOFORM_PHYSICS) if set.
 */
export function tuningFor(s: {
  timing: 'chaos' | 'default';
  faults: string | undefined;
  slotsPerShard?: number;
  shardsPerGroup?: number;
  physics?: number;
}): Tuning {
  const base = s.timing === 'default' ? DEFAULT_TUNING : CHAOS_TUNING;
  const env = {
    ...base.env,
    ...(s.faults ? { TAKOFORM_FAULTS: s.faults } : {}),
    ...(s.slotsPerShard !== undefined ? { TAKOFORM_SLOTS_PER_SHARD: String(s.slotsPerShard) } : {}),
    ...(s.shardsPerGroup !== undefined ? { TAKOFORM_SHARDS_PER_GROUP: String(s.shardsPerGroup) } : {}),
    ...(s.physics !== undefined ? { TAKOFORM_PHYSICS: String(s.physics) } : {}),
  };
  return { ...base, env };
}

export interface LiveHost {
  readonly incarnation: number;
  readonly pid: number;
  readonly startTime: string;
  readonly child: ChildProcess;
  readonly origin: string;
  readonly apiKey: string;
  readonly arm: string | undefined;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  dead: boolean;
  /** Set when this controller killed or stopped it (otherwise a death is a crash point or a bug). */
  stoppedByUs: boolean;
  diedAt?: number;
}

export interface ControllerEvent {
  t: number;
  kind:
    | 'start'
    | 'crash'
    | 'crash-missed'
    | 'kill9'
    | 'term'
    | 'term-failed'
    | 'unexpected-exit'
    | 'standin-kill'
    | 'standin-back'
    | 'standin-missing';
  incarnation: number;
  detail?: string;
}

export interface StandInProc {
  pid: number;
  startTime: string;
  port: number | undefined;
}

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('TAKOFORM_')) env[k] = v;
  return { ...env, ...extra };
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

export class HostController {
  readonly events: ControllerEvent[] = [];
  /** PID → start time of every process seen under a Host this controller started. */
  private readonly seen = new Map<number, string>();
  private readonly dataDir: string;
  private readonly workersDir: string;
  private readonly logFile: string;
  private readonly arms: (string | undefined)[];
  private readonly tuning: Tuning;
  private current: LiveHost | undefined;
  private starting: Promise<LiveHost> | undefined;
  private nextIncarnation = 0;
  private closed = false;

  constructor(opts: {
    dataDir: string;
    workersDir: string;
    logFile: string;
    arms: (string | undefined)[];
    tuning?: Tuning;
  }) {
    this.dataDir = opts.dataDir;
    this.workersDir = opts.workersDir;
    this.logFile = opts.logFile;
    this.arms = opts.arms;
    this.tuning = opts.tuning ?? CHAOS_TUNING;
  }

  /** Index of the running (or starting) incarnation; -1 before the first start. */
  get incarnation(): number {
    return this.nextIncarnation - 1;
  }

  private note(kind: ControllerEvent['kind'], detail?: string): void {
    const e: ControllerEvent = { t: Date.now(), kind, incarnation: this.incarnation };
    if (detail !== undefined) e.detail = detail;
    this.events.push(e);
    appendFileSync(
      this.logFile,
      `[chaos] ${new Date(e.t).toISOString()} ${kind} #${e.incarnation} ${detail ?? ''}\n`,
    );
  }

  /** Deaths of Hosts (pid and time), for closing the intervals of handlers that died with them. */
  deaths(): Map<number, number> {
    const out = new Map<number, number>();
    for (const h of this.all) if (h.diedAt !== undefined) out.set(h.pid, h.diedAt);
    return out;
  }
  private readonly all: LiveHost[] = [];

  /** The running Host, starting the next incarnation first if the last one died. */
  async ready(): Promise<LiveHost> {
    for (let round = 0; round < 5; round++) {
      if (this.closed) throw new Error('the controller is closed');
      if (this.current && !this.current.dead) return this.current;
      this.starting ??= this.startNext()
        .catch((err: Error) => {
          // Noted once, however many callers wait for this start. A crash point reached while
          // the Host recovers a dead run's batches (before its ready line) is a crash like any
          // other: the next incarnation starts.
          if (!(err instanceof CrashedDuringStart))
            this.note('unexpected-exit', `start failed: ${err.message.slice(0, 1500)}`);
          throw err;
        })
        .finally(() => {
          this.starting = undefined;
        });
      try {
        return await this.starting;
      } catch {
        await sleep(500);
      }
    }
    throw new Error('the Host could not be started');
  }

  private async startNext(): Promise<LiveHost> {
    const incarnation = this.nextIncarnation++;
    const arm = this.arms[incarnation];
    const env: Record<string, string> = { ...this.tuning.env };
    if (arm) env.TAKOFORM_CRASH_AT = arm;
    // Debug lines (every injected fault, every lane start) in host.log, for a replay by hand.
    if (process.env.TAKOFORM_CHAOS_DEBUG) env.TAKOFORM_DEBUG = '1';
    const child = spawn(
      process.execPath,
      [
        MAIN,
        '--port',
        '0',
        '--data-dir',
        this.dataDir,
        '--workers-dir',
        this.workersDir,
        '--worker-timeout',
        String(this.tuning.workerTimeoutSeconds),
      ],
      { cwd: path.dirname(this.dataDir), env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', () => resolve({ code: null, signal: null }));
    });
    // The end of what this incarnation wrote, so that a start-up failure says why.
    let stderrTail = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      appendFileSync(this.logFile, chunk);
      stderrTail = (stderrTail + chunk).slice(-2000);
    });
    let readyYet = false;
    const lines = createInterface({ input: child.stdout! });
    const ready = await Promise.race([
      new Promise<{ origin: string; apiKey: string }>((resolve) => {
        lines.on('line', (line) => {
          if (!line.startsWith(READY_PREFIX)) return;
          readyYet = true;
          resolve(JSON.parse(line.slice(READY_PREFIX.length)));
        });
      }),
      exited.then((e) => {
        if (readyYet) return new Promise<never>(() => {}); // died later: noted by the handler below
        if (e.signal === 'SIGKILL' && arm) {
          this.note('crash', `${arm} (during start-up)`);
          throw new CrashedDuringStart(arm);
        }
        const last = stderrTail.trim().split('\n').slice(-3).join(' | ');
        throw new Error(`the Host exited during start-up (code ${e.code}, signal ${e.signal}): ${last}`);
      }),
      sleep(60_000).then(() => {
        throw new Error('the Host was not ready within 60 s');
      }),
    ]).catch((err) => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      throw err;
    });
    const pid = child.pid as number;
    const host: LiveHost = {
      incarnation,
      pid,
      startTime: procInfo(pid)?.startTime ?? '',
      child,
      origin: ready.origin,
      apiKey: ready.apiKey,
      arm,
      exited,
      dead: false,
      stoppedByUs: false,
    };
    this.all.push(host);
    this.remember(pid);
    void exited.then((e) => {
      host.dead = true;
      host.diedAt = Date.now();
      if (host.stoppedByUs || this.closed) return;
      if (e.signal === 'SIGKILL' && arm) this.note('crash', arm);
      else this.note('unexpected-exit', `code ${e.code} signal ${e.signal}`);
    });
    this.current = host;
    this.note('start', arm ? `armed ${arm}` : 'nothing armed');
    return host;
  }

  private remember(pid: number): void {
    for (const d of descendantPids(pid)) {
      const info = procInfo(d);
      if (info && !this.seen.has(d)) this.seen.set(d, info.startTime);
    }
  }

  /** The Host's stand-ins, found among its descendants by their command lines. */
  standIns(): { dynamodb?: StandInProc; sqs?: StandInProc } {
    const host = this.current;
    if (!host || host.dead) return {};
    this.remember(host.pid);
    const out: { dynamodb?: StandInProc; sqs?: StandInProc } = {};
    for (const pid of descendantPids(host.pid)) {
      const cmd = cmdline(pid);
      const which = cmd.includes('LocalhostDynamoDB')
        ? 'dynamodb'
        : cmd.includes('sqs-server-main')
          ? 'sqs'
          : undefined;
      if (!which) continue;
      const info = procInfo(pid);
      if (!info) continue;
      const listener = tcpListeners([pid]).find(
        (l) => l.address === '127.0.0.1' || l.address === '::ffff:127.0.0.1',
      );
      out[which] = { pid, startTime: info.startTime, port: listener?.port };
    }
    return out;
  }

  /** Endpoints of the running Host's stand-ins (read from /proc), waiting (bounded) for both. */
  async endpoints(timeoutMs = 30_000): Promise<{ dynamodb: string; sqs: string }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.ready();
      const s = this.standIns();
      if (s.dynamodb?.port && s.sqs?.port) {
        return { dynamodb: `http://127.0.0.1:${s.dynamodb.port}`, sqs: `http://127.0.0.1:${s.sqs.port}` };
      }
      if (Date.now() > deadline) throw new Error('the stand-ins of the Host were not found');
      await sleep(200);
    }
  }

  /**
   * Crashes one stand-in by PID; returns once the Host has started a new one (bounded). The SQS
   * stand-in gets SIGKILL. DynamoDB Local gets SIGHUP, which its launcher turns into an abrupt
   * crash that keeps acknowledged writes: SIGKILL would also lose the last writes it acknowledged,
   * which DynamoDB never does (test/integration/faults/dynamodb-crash.test.ts).
   */
  async killStandIn(which: 'dynamodb' | 'sqs'): Promise<boolean> {
    const host = await this.ready();
    const before = this.standIns()[which];
    if (!before || !isRunning(before.pid, before.startTime)) {
      this.note('standin-missing', which);
      return false;
    }
    process.kill(before.pid, which === 'dynamodb' ? 'SIGHUP' : 'SIGKILL');
    this.note('standin-kill', `${which} pid ${before.pid}`);
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && !host.dead) {
      await sleep(100);
      const now = this.standIns()[which];
      if (now && now.pid !== before.pid) {
        this.note('standin-back', `${which} pid ${now.pid}`);
        return true;
      }
    }
    return false;
  }

  /**
   * Waits for the running incarnation to die at its armed crash point. When the bound passes, or
   * `idle` says twice in a row that nothing is left to do (so the point cannot be reached any
   * more), the Host is killed with `kill -9` instead and the miss is noted.
   */
  async awaitCrash(boundMs: number, idle: () => Promise<boolean>): Promise<'crashed' | 'missed'> {
    const host = this.current;
    if (!host) return 'crashed';
    const deadline = Date.now() + boundMs;
    let quiet = 0;
    while (!host.dead && Date.now() < deadline && quiet < 2) {
      await Promise.race([host.exited, sleep(500)]);
      if (host.dead) break;
      quiet = (await idle().catch(() => false)) ? quiet + 1 : 0;
    }
    if (!host.dead) {
      this.note(
        'crash-missed',
        `${host.arm ?? ''} not reached (${quiet >= 2 ? 'idle' : `${boundMs} ms`}); kill -9`,
      );
      await this.kill9();
      return 'missed';
    }
    await host.exited;
    return 'crashed';
  }

  /** `kill -9` of the running Host process (its stand-ins then exit as their stdin closes). */
  async kill9(): Promise<void> {
    const host = this.current;
    if (!host || host.dead) return;
    this.remember(host.pid);
    host.stoppedByUs = true;
    if (isRunning(host.pid, host.startTime)) process.kill(host.pid, 'SIGKILL');
    this.note('kill9', `pid ${host.pid}`);
    await Promise.race([host.exited, sleep(10_000)]);
  }

  /** SIGTERM: the Host stops gracefully and exits 0 (bounded); false if it did not. */
  async term(): Promise<boolean> {
    const host = this.current;
    if (!host || host.dead) return true;
    this.remember(host.pid);
    host.stoppedByUs = true;
    process.kill(host.pid, 'SIGTERM');
    const exit = await Promise.race([host.exited, sleep(30_000).then(() => undefined)]);
    const ok = exit?.code === 0;
    this.note(ok ? 'term' : 'term-failed', JSON.stringify(exit ?? 'timeout'));
    if (!exit) await this.kill9();
    return ok;
  }

  /** Stops everything this controller started: the Host (SIGTERM, then SIGKILL), then strays. */
  async close(): Promise<{ cleanExit: boolean }> {
    const ok = await this.term().catch(() => false);
    this.closed = true;
    for (const [pid, start] of this.seen) {
      if (isRunning(pid, start)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
    const deadline = Date.now() + 10_000;
    while ([...this.seen].some(([pid, start]) => isRunning(pid, start)) && Date.now() < deadline)
      await sleep(50);
    return { cleanExit: ok };
  }

  /** One HTTP request to the running Host, retried (bounded) across deaths and restarts. */
  async request(
    method: string,
    pathname: string,
    o: { body?: unknown; headers?: Record<string, string>; api?: boolean; tries?: number } = {},
  ): Promise<{ status: number; body: unknown }> {
    let lastError: unknown;
    for (let attempt = 0; attempt < (o.tries ?? 8); attempt++) {
      const host = await this.ready();
      const headers: Record<string, string> = { authorization: `Bearer ${host.apiKey}`, ...o.headers };
      if (o.body !== undefined) headers['content-type'] = 'application/json';
      try {
        const res = await fetch(`${host.origin}${o.api === false ? '' : API_ROOT_PATH}${pathname}`, {
          method,
          headers,
          body: o.body === undefined ? undefined : JSON.stringify(o.body),
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : undefined };
      } catch (err) {
        lastError = err;
        await sleep(300);
      }
    }
    throw new Error(`${method} ${pathname}: no answer (${(lastError as Error)?.message})`);
  }
}
