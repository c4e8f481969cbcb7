/**
 * Structured JSON logs on stderr (stdout carries only the ready line locally). Errors are
 * reduced to their name and a stack without the message, so secrets in messages never leak.
 */
type Fields = Record<string, unknown>;

function safe(fields: Fields): Fields {
  const out: Fields = {};
  for (const [k, v] of Object.entries(fields)) {
    out[k] = v instanceof Error ? { name: v.name, code: (v as { code?: unknown }).code } : v;
  }
  return out;
}

function write(level: string, message: string, fields: Fields = {}): void {
  process.stderr.write(
    `${JSON.stringify({ time: new Date().toISOString(), level, message, ...safe(fields) })}\n`,
  );
}

export const log = {
  debug: (message: string, fields?: Fields) => {
    if (process.env.TAKOFORM_DEBUG) write('debug', message, fields);
  },
  info: (message: string, fields?: Fields) => write('info', message, fields),
  warn: (message: string, fields?: Fields) => write('warn', message, fields),
  error: (message: string, fields?: Fields) => write('error', message, fields),
};
