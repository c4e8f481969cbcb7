import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
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
    const lock = path.join(root, 'host.pid');
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(lock, 'wx', 0o600);
        writeSync(fd, String(process.pid));
        closeSync(fd);
        const dir = new DataDir(root);
        await dir.reapStandIns();
        return dir;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const owner = Number(readFileSync(lock, 'utf8'));
        if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
          throw new DataDirInUseError(`another Host (pid ${owner}) is using the data folder ${root}`);
        }
        rmSync(lock, { force: true }); // left by a Host that no longer runs
      }
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
      const ours = () => alive(pid) && commandLine(pid).includes(marker);
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

  release(): void {
    rmSync(this.path('standins.json'), { force: true });
    rmSync(this.path('host.pid'), { force: true });
  }
}
