import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

/**
 * What the Host's own command line contains: `npm start` runs `node lambdas/local/main.ts`,
 * `takoform dev` the package's compiled `lambdas/local/main.js`.
 */
const HOST_ENTRY = path.join('lambdas', 'local', 'main.');

/**
 * State (field 3) and start time in clock ticks since boot (field 22) of /proc/<pid>/stat;
 * undefined when there is no such process. The command name (field 2) may hold spaces and
 * parentheses, so fields are counted from its last ')'.
 */
function procStat(pid: number, proc: string): { state: string; startTime: string } | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(proc, String(pid), 'stat'), 'utf8');
  } catch {
    return undefined;
  }
  const fields = text
    .slice(text.lastIndexOf(')') + 2)
    .trim()
    .split(/\s+/);
  return { state: fields[0] ?? '', startTime: fields[19] ?? '' };
}

function signalable(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function commandLine(pid: number, proc = '/proc'): string | undefined {
  try {
    return readFileSync(path.join(proc, String(pid), 'cmdline'), 'utf8').replaceAll('\0', ' ');
  } catch {
    return undefined;
  }
}

/** True while `pid` is a process that has not exited (a zombie or dead one has). */
function running(pid: number, proc = '/proc'): boolean {
  if (!existsSync(path.join(proc, 'self', 'stat'))) return signalable(pid);
  const s = procStat(pid, proc);
  return s !== undefined && s.state !== 'Z' && s.state !== 'X';
}

/** The Host that wrote a lock: its PID and, when recorded, its start time. */
export interface LockOwner {
  pid: number;
  startTime?: string;
}

/**
 * Whether the Host that wrote a lock still runs. `kill(pid, 0)` alone is not enough: a Host
 * killed with `kill -9` stays a zombie until its parent reaps it (forever under a PID 1 that never
 * reaps), and its PID can later name an unrelated process. So the process must exist and not be a
 * zombie, and be that Host: the same start time when one was recorded, otherwise a command line
 * that runs the Host's entry. Without /proc only `kill(pid, 0)` is available, and used.
 */
export function ownerRuns(owner: LockOwner, proc = '/proc'): boolean {
  if (!existsSync(path.join(proc, 'self', 'stat'))) return signalable(owner.pid);
  const s = procStat(owner.pid, proc);
  if (!s || s.state === 'Z' || s.state === 'X') return false;
  if (owner.startTime !== undefined) return s.startTime === owner.startTime;
  const cmd = commandLine(owner.pid, proc);
  // Unreadable (e.g. /proc mounted with hidepid): keep the lock rather than risk two Hosts.
  return cmd === undefined || cmd.includes(HOST_ENTRY);
}

/** The lock: the Host's PID alone, as pid files are (`kill $(cat .data/host.pid)`). */
const LOCK = 'host.pid';
/** `<pid> <start time>` of the Host holding the lock, written right after it is taken. */
const OWNER = 'host.owner';
/** Where the running Host listens (`LocalConnection`), for local tools such as `takoform`. */
export const CONNECTION_FILE = 'host.json';

/**
 * What a running local Host writes into its data folder once it serves: `listen` is the
 * 127.0.0.1 address to send requests to (whatever origin it advertises); the development key,
 * when there is one, stays in `dev-api-key`.
 */
export interface LocalConnection {
  listen: string;
  origin: string;
  pid: number;
}

/**
 * Creates the lock file with its content in one step: a complete temporary file is hard-linked
 * to the lock's name, which fails if the name exists. A reader therefore never sees an empty
 * lock. Where hard links are not supported, an exclusive create is used instead.
 */
function takeLock(lock: string): boolean {
  const tmp = `${lock}.${process.pid}.tmp`;
  writeFileSync(tmp, String(process.pid), { mode: 0o600 });
  try {
    linkSync(tmp, lock);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw err;
    try {
      const fd = openSync(lock, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
  } finally {
    rmSync(tmp, { force: true });
  }
}

function lockText(lock: string): string | undefined {
  try {
    return readFileSync(lock, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/**
 * The owner named by the lock's text, with its start time when `host.owner` names the same PID
 * (a record left by an earlier Host, or one not written yet, is ignored). Undefined when the text
 * is not a PID.
 */
function ownerOf(root: string, text: string): LockOwner | undefined {
  const pid = Number(text);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const [recordedPid, startTime] = readFileSync(path.join(root, OWNER), 'utf8').trim().split(' ');
    if (Number(recordedPid) === pid && startTime && /^\d+$/.test(startTime)) return { pid, startTime };
  } catch {
    // no record: judged by the command line
  }
  return { pid };
}

/** The data folder is held by another running Host; the message is meant for the operator. */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
}

/**
 * Owns a data folder for one running Host: refuses a second Host on the same folder, and after
 * a crash (kill -9) waits for, then stops, stand-ins the previous run left, so two servers never
 * open the same files. Only processes recorded here, whose command line still matches, are touched.
 */
export class DataDir {
  readonly root: string;
  private constructor(root: string) {
    this.root = root;
  }

  static async claim(root: string): Promise<DataDir> {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    const lock = path.join(root, LOCK);
    for (let attempt = 0; attempt < 2; attempt++) {
      if (takeLock(lock)) {
        // Who holds the lock, precisely enough to tell a reused PID apart (none without /proc).
        const self = procStat(process.pid, '/proc');
        if (self) {
          const tmp = path.join(root, `${OWNER}.${process.pid}.tmp`);
          writeFileSync(tmp, `${process.pid} ${self.startTime}\n`, { mode: 0o600 });
          renameSync(tmp, path.join(root, OWNER));
        }
        const dir = new DataDir(root);
        await dir.reapStandIns();
        return dir;
      }
      const text = lockText(lock);
      const owner = text === undefined ? undefined : ownerOf(root, text);
      // A lock naming this PID without this start time was left by an earlier process (a
      // container restarted with the same PID); with it, this very process holds the folder.
      const held = owner && ownerRuns(owner) && (owner.pid !== process.pid || owner.startTime !== undefined);
      if (owner && held) {
        throw new DataDirInUseError(`another Host (pid ${owner.pid}) is using the data folder ${root}`);
      }
      // Left by a Host that no longer runs. Removed only if it still names that owner, so a lock
      // a concurrent start has just taken is not removed.
      if (text !== undefined && lockText(lock) === text) rmSync(lock, { force: true });
    }
    throw new DataDirInUseError(`could not lock the data folder ${root}`);
  }

  path(...parts: string[]): string {
    return path.join(this.root, ...parts);
  }

  /** Records the stand-ins' PIDs so a later start can clean up after a crash. */
  recordStandIns(pids: { pid: number; marker: string }[]): void {
    writeFileSync(this.path('standins.json'), JSON.stringify(pids), { mode: 0o600 });
  }

  private async reapStandIns(): Promise<void> {
    let recorded: { pid: number; marker: string }[] = [];
    try {
      recorded = JSON.parse(readFileSync(this.path('standins.json'), 'utf8'));
    } catch {
      return;
    }
    for (const { pid, marker } of recorded) {
      const ours = () => running(pid) && (commandLine(pid) ?? '').includes(marker);
      // They exit by themselves once the dead Host's pipe closes; give them a moment first.
      for (let i = 0; i < 50 && ours(); i++) await new Promise((r) => setTimeout(r, 100));
      if (ours()) process.kill(pid, 'SIGKILL');
    }
    rmSync(this.path('standins.json'), { force: true });
  }

  /** The development API key of this data folder, created once and kept (mode 0600). */
  devApiKey(): string {
    const file = this.path('dev-api-key');
    try {
      const key = readFileSync(file, 'utf8').trim();
      if (key.length >= 32) return key;
    } catch {
      // created below
    }
    const key = `tfk_dev_${randomBytes(24).toString('base64url')}`;
    writeFileSync(file, `${key}\n`, { mode: 0o600 });
    return key;
  }

  /** Written once the Host serves; removed when it stops (a stale one refuses connections). */
  recordConnection(c: LocalConnection): void {
    const tmp = this.path(`${CONNECTION_FILE}.${process.pid}.tmp`);
    writeFileSync(tmp, `${JSON.stringify(c)}\n`, { mode: 0o600 });
    renameSync(tmp, this.path(CONNECTION_FILE));
  }

  release(): void {
    rmSync(this.path(CONNECTION_FILE), { force: true });
    rmSync(this.path('standins.json'), { force: true });
    // The owner record first: while only the PID is left, the lock still reads as this Host's.
    rmSync(this.path(OWNER), { force: true });
    rmSync(this.path(LOCK), { force: true });
  }
}
