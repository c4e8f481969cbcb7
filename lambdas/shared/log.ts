/**
 * The one logger of the Host: every module, core included, writes through `log`. Where the lines
 * go is the composition's choice: on AWS, Powertools Logger (composition/aws-observability.ts:
 * request id, function name and cold start on every line); locally, JSON lines on stderr (stdout
 * carries only the ready line). `log.withKeys` scopes keys such as the consumer and batch to one
 * call and everything it awaits, so the core's lines carry them without passing them around.
 *
 * Errors are reduced to their name and code before any sink sees them, so secrets in messages
 * never leak.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export type LogFields = Record<string, unknown>;
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Where lines go: `fields` are already safe and carry the scoped keys. */
export type LogSink = (level: LogLevel, message: string, fields: LogFields) => void;

function safe(fields: LogFields): LogFields {
  const out: LogFields = {};
  for (const [k, v] of Object.entries(fields)) {
    out[k] = v instanceof Error ? { name: v.name, code: (v as { code?: unknown }).code } : v;
  }
  return out;
}

/** JSON lines on stderr; debug only with TAKOFORM_DEBUG set. */
export const stderrSink: LogSink = (level, message, fields) => {
  if (level === 'debug' && !process.env.TAKOFORM_DEBUG) return;
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
};

let sink: LogSink = stderrSink;
const scoped = new AsyncLocalStorage<LogFields>();

function write(level: LogLevel, message: string, fields: LogFields = {}): void {
  sink(level, message, safe({ ...scoped.getStore(), ...fields }));
}

export const log = {
  debug: (message: string, fields?: LogFields) => write('debug', message, fields),
  info: (message: string, fields?: LogFields) => write('info', message, fields),
  warn: (message: string, fields?: LogFields) => write('warn', message, fields),
  error: (message: string, fields?: LogFields) => write('error', message, fields),
  /** Runs `fn` with `keys` on every line it (and what it awaits) writes. */
  withKeys<T>(keys: LogFields, fn: () => T): T {
    return scoped.run({ ...scoped.getStore(), ...keys }, fn);
  },
};

/** Sends every line to `next` from now on (the composition's choice; tests restore the old one). */
export function setLogSink(next: LogSink): LogSink {
  const previous = sink;
  sink = next;
  return previous;
}
