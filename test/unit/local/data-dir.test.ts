/**
 * RC-04 / issue 11 item 2: the data-folder lock must let a supervisor restart the Host at once
 * after `kill -9`. The previous Host's process can linger as a zombie (dead, not yet reaped by its
 * parent; forever under a PID 1 that never reaps), and its PID can be reused by an unrelated
 * process: neither may hold the folder. A Host that really runs keeps it.
 *
 * Every owner here is a real process: a genuine zombie (a child that exited under a parent that
 * never waits), a live `sleep`, and a live process whose command line names the Host's entry.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DataDir, DataDirInUseError, ownerRuns } from '../../../lambdas/local/data-dir.ts';

const started: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const c of started.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
});
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRoot(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'takoform-datadir-'));
  dirs.push(dir);
  return path.join(dir, 'data');
}

/** Field 3 (state) and field 22 (start time) of /proc/<pid>/stat, or undefined once it is gone. */
function stat(pid: number): { state: string; startTime: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const rest = text
    .slice(text.lastIndexOf(')') + 2)
    .trim()
    .split(/\s+/);
  return { state: rest[0] ?? '?', startTime: rest[19] ?? '' };
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(20);
  }
}

function track(child: ChildProcess): ChildProcess {
  started.push(child);
  return child;
}

/**
 * A genuine zombie: `sh` starts a short `sleep` in the background, prints its PID and replaces
 * itself with a long `sleep`, which never waits for children, so the short one stays unreaped
 * once it exits. Stopping the long `sleep` (afterEach) hands the zombie to init.
 */
async function zombie(): Promise<number> {
  const parent = track(
    spawn('sh', ['-c', 'sleep 0.2 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'inherit'] }),
  );
  const lines = createInterface({ input: parent.stdout! });
  const first = await new Promise<string>((resolve) => lines.once('line', resolve));
  lines.close();
  const pid = Number(first);
  expect(Number.isInteger(pid) && pid > 0).toBe(true);
  await until(`pid ${pid} becomes a zombie`, () => stat(pid)?.state === 'Z');
  return pid;
}

/** A live process with the given arguments after node's own; resolves once it runs. */
async function liveNode(...args: string[]): Promise<number> {
  const child = track(
    spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', ...args], { stdio: 'ignore' }),
  );
  const pid = child.pid as number;
  await until(`pid ${pid} runs`, () => {
    const s = stat(pid);
    return s !== undefined && s.state !== 'Z' && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('-e');
  });
  return pid;
}

async function liveSleep(): Promise<number> {
  const child = track(spawn('sleep', ['60'], { stdio: 'ignore' }));
  const pid = child.pid as number;
  await until(`sleep ${pid} runs`, () => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep'));
  return pid;
}

/** Writes the lock as a previous Host left it: `host.pid`, and `host.owner` when a start time is given. */
function leaveLock(root: string, pid: number, startTime?: string): void {
  mkdirSync(root, { recursive: true });
  writeFileSync(path.join(root, 'host.pid'), String(pid));
  if (startTime !== undefined) writeFileSync(path.join(root, 'host.owner'), `${pid} ${startTime}\n`);
}

const lockOf = (root: string) => readFileSync(path.join(root, 'host.pid'), 'utf8');

describe('RC-04 item 2: the data-folder lock after kill -9', () => {
  it('RC-04 item 2: a zombie owner (killed, not yet reaped) does not hold the folder', async () => {
    const pid = await zombie();
    const startTime = stat(pid)?.startTime as string;
    // The old check, kill(pid, 0), succeeds on a zombie: this is the case it got wrong.
    expect(() => process.kill(pid, 0)).not.toThrow();
    const root = tempRoot();
    leaveLock(root, pid, startTime);

    const dir = await DataDir.claim(root);
    expect(lockOf(root)).toBe(String(process.pid));
    dir.release();
  });

  it('RC-04 item 2: a zombie owner recorded without a start time (older lock) does not hold the folder', async () => {
    const pid = await zombie();
    const root = tempRoot();
    leaveLock(root, pid);
    const dir = await DataDir.claim(root);
    expect(lockOf(root)).toBe(String(process.pid));
    dir.release();
  });

  it('RC-04 item 2: a PID reused by an unrelated live process does not hold the folder', async () => {
    const pid = await liveSleep();
    const real = stat(pid)?.startTime as string;
    expect(() => process.kill(pid, 0)).not.toThrow();

    // With the recorded start time of the dead Host (not this process's): another process.
    const root = tempRoot();
    leaveLock(root, pid, String(Number(real) - 1));
    const dir = await DataDir.claim(root);
    expect(lockOf(root)).toBe(String(process.pid));
    dir.release();

    // With no start time recorded: the command line says it is not a Host.
    const older = tempRoot();
    leaveLock(older, pid);
    const again = await DataDir.claim(older);
    expect(lockOf(older)).toBe(String(process.pid));
    again.release();
  });

  it('RC-04 item 2: a live Host (its command line runs lambdas/local/main.ts) keeps the folder', async () => {
    const pid = await liveNode(path.join(os.tmpdir(), 'checkout', 'lambdas', 'local', 'main.ts'));
    const root = tempRoot();
    leaveLock(root, pid);
    const claim = DataDir.claim(root);
    await expect(claim).rejects.toBeInstanceOf(DataDirInUseError);
    await expect(claim).rejects.toThrow(`another Host (pid ${pid}) is using the data folder ${root}`);
    expect(lockOf(root)).toBe(String(pid));
  });

  it('RC-04 item 2: a live owner whose start time matches the lock keeps the folder, whatever its command line', async () => {
    const pid = await liveSleep();
    const root = tempRoot();
    leaveLock(root, pid, stat(pid)?.startTime);
    await expect(DataDir.claim(root)).rejects.toThrow(
      `another Host (pid ${pid}) is using the data folder ${root}`,
    );
    expect(lockOf(root)).toBe(String(pid));
  });

  it('RC-04 item 2: a claim records its PID and start time; release removes both', async () => {
    const root = tempRoot();
    const dir = await DataDir.claim(root);
    expect(lockOf(root)).toBe(String(process.pid));
    const owner = readFileSync(path.join(root, 'host.owner'), 'utf8').trim();
    expect(owner).toBe(`${process.pid} ${stat(process.pid)?.startTime}`);
    // This process really runs: a second claim is refused by the start time alone.
    await expect(DataDir.claim(root)).rejects.toBeInstanceOf(DataDirInUseError);
    dir.release();
    expect(() => readFileSync(path.join(root, 'host.pid'))).toThrow(/ENOENT/);
    expect(() => readFileSync(path.join(root, 'host.owner'))).toThrow(/ENOENT/);
  });

  it('RC-04 item 2: without /proc the check falls back to kill(pid, 0)', async () => {
    const live = await liveSleep();
    const noProc = path.join(os.tmpdir(), `no-proc-${process.pid}-${Date.now()}`);
    expect(ownerRuns({ pid: live }, noProc)).toBe(true);
    expect(ownerRuns({ pid: live, startTime: '1' }, noProc)).toBe(true);
    const child = started.at(-1) as ChildProcess;
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(ownerRuns({ pid: live }, noProc)).toBe(false);
    // With /proc, the same answers for the same processes.
    expect(ownerRuns({ pid: live })).toBe(false);
    expect(ownerRuns({ pid: process.pid, startTime: stat(process.pid)?.startTime })).toBe(true);
    // This test process is alive but is no Host, and nothing recorded its start time.
    expect(ownerRuns({ pid: process.pid })).toBe(false);
  });
});
