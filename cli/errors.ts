/** How the CLI ends (host-profile §6): 0 success, 1 refused or failed, 2 usage error. */
export const EXIT = { ok: 0, refused: 1, usage: 2 } as const;

/** The command line itself is wrong: exit 2, before anything is sent. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * The Host refused, an Operation failed, or the Host could not be reached: exit 1 with `code`
 * and `detail` on stderr. `code` is the Problem's (or the failed Operation's) code when there is one.
 */
export class RefusedError extends Error {
  override name = 'RefusedError';
  readonly code: string;
  readonly detail: string;
  readonly status: number | undefined;
  constructor(code: string, detail: string, status?: number) {
    super(`${code}: ${detail}`);
    this.code = code;
    this.detail = detail;
    this.status = status;
  }
}

const FILE_ERRORS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a folder, not a file',
  ENOTDIR: 'a part of the path is not a folder',
  ELOOP: 'too many symbolic links',
  EMFILE: 'too many open files',
};

/** Why a file could not be read, in words (`cannot read FILE: <this>`). */
export function whyUnreadable(err: unknown): string {
  const code = (err as NodeJS.ErrnoException)?.code;
  return (code && FILE_ERRORS[code]) ?? (err as Error)?.message ?? String(err);
}
