import type { HandlerError } from '../delivery/settlement-protocol.ts';

/**
 * A worker's own error as its author needs it: name, message and stack. It goes to the worker's
 * log only (on AWS the worker function's log group, locally the Host's stderr under the worker's
 * prefix), never into a Host API response. Bounded: the worker decides what its errors hold.
 */
export interface ErrorReport {
  error: string;
  message: string;
  stack?: string;
}

const MAX_CHARS = 4_000;
const bound = (text: string) => (text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS)}… (cut)` : text);

export function errorReport(err: unknown): ErrorReport {
  if (err instanceof Error) {
    return {
      error: err.name,
      message: bound(err.message),
      ...(typeof err.stack === 'string' ? { stack: bound(err.stack) } : {}),
    };
  }
  return { error: typeof err, message: bound(String(err)) };
}

/** Name and message only, shorter: what the Host keeps of a handler's error for operators. */
export function handlerError(err: unknown): HandlerError {
  const r = errorReport(err);
  // At most `max` characters in all, so that the batch host's bounds (128, 300) always accept them.
  const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
  return { name: cut(r.error, 128), message: cut(r.message, 300) };
}

/** The report as lines of text: the stack when it starts with name and message, else both. */
export function errorText(err: unknown): string {
  const r = errorReport(err);
  const head = `${r.error}: ${r.message}`;
  return r.stack?.startsWith(head) ? r.stack : r.stack ? `${head}\n${r.stack}` : head;
}
