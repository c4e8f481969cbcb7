/**
 * The reference of every spec field, rendered from the zod schemas the Host validates with:
 * `takoform explain KIND` prints it, docs/forms/KIND.md holds it (`npm run docs:forms` writes
 * them; a test fails when a page and its schema disagree).
 */
import type { z } from 'zod';
import { queueSpecSchema } from '../lambdas/forms/at-least-once-queue/queue-spec.ts';
import { FORM_URLS } from '../lambdas/forms/form-urls.ts';
import { workerSpecSchema } from '../lambdas/forms/module-worker/module-worker-form.ts';
import { consumerSpecSchema } from '../lambdas/forms/queue-consumer/consumer-spec.ts';
import { type FieldInfo, fieldsOf } from '../lambdas/forms/shared/spec-fields.ts';
import type { Kind } from './kinds.ts';

interface FormDoc {
  title: string;
  url: string;
  summary: string;
  schema: z.ZodObject;
  example: Record<string, unknown>;
}

export const FORM_DOCS: Record<Kind, FormDoc> = {
  queue: {
    title: 'AtLeastOnceQueue 0.2.0',
    url: FORM_URLS.atLeastOnceQueue,
    summary:
      'A queue whose messages are delivered at least once: one SQS standard queue per Resource. Messages are sent by workers (producer bindings), by `takoform send` or the HTTP producer extension.',
    schema: queueSpecSchema,
    example: { messageRetentionSeconds: 86400 },
  },
  worker: {
    title: 'ModuleWorker 0.3.0',
    url: FORM_URLS.moduleWorker,
    summary:
      'A name for worker code. The spec is exactly `{}`: the code comes from a module in the workers folder (local Host) or a ModuleWorkerFunction deployment (AWS), and `observed.ready` says whether the Host has it.',
    schema: workerSpecSchema,
    example: {},
  },
  consumer: {
    title: 'QueueConsumer 0.3.0',
    url: FORM_URLS.queueConsumer,
    summary:
      'Delivers a queue’s messages in batches to a worker’s queue handler, retries what fails and moves what runs out of retries to a dead-letter queue. Every integer is required: there are no defaults.',
    schema: consumerSpecSchema,
    example: {
      queue: { name: 'orders' },
      worker: { name: 'echo' },
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 1,
      maxConcurrency: 2,
      maxRetries: 3,
      retryDelaySeconds: 5,
      deadLetterQueue: { name: 'orders-dlq' },
    },
  },
};

/** The reference of one kind as data (`takoform explain KIND --json`). */
export function reference(kind: Kind): { kind: Kind; form: string; title: string; fields: FieldInfo[] } {
  const d = FORM_DOCS[kind];
  return { kind, form: d.url, title: d.title, fields: fieldsOf(d.schema) };
}

function typeOf(f: FieldInfo): string {
  if (f.type === 'reference') return `reference to a ${f.refersTo}: \`{"resourceUid": …}\``;
  return 'integer';
}

const rangeOf = (f: FieldInfo) => (f.type === 'integer' ? `${f.min}..${f.max}` : '');
const defaultOf = (f: FieldInfo) =>
  f.required ? 'none (required)' : f.default === undefined ? 'none' : String(f.default);

/** docs/forms/KIND.md. */
export function markdown(kind: Kind): string {
  const d = FORM_DOCS[kind];
  const fields = fieldsOf(d.schema);
  const lines = [
    `# ${d.title} (\`kind: ${kind}\`)`,
    '',
    '<!-- Generated from the spec schema the Host validates with (npm run docs:forms); do not edit. -->',
    '',
    `Form URL: \`${d.url}\``,
    '',
    d.summary,
    '',
  ];
  if (fields.length === 0) {
    lines.push(
      'The spec has no fields: it is exactly `{}`; any field is refused with `422 invalid_spec`.',
      '',
    );
  } else {
    lines.push(
      '| Field | Type | Range | Default | Updatable | Description |',
      '|---|---|---|---|---|---|',
      ...fields.map(
        (f) =>
          `| \`${f.name}\` | ${typeOf(f)} | ${rangeOf(f)} | ${defaultOf(f)} | ${f.updatable ? 'yes' : 'no: delete and re-create'} | ${f.description} |`,
      ),
      '',
      'Unknown fields, and integers given as strings, fractions, `null` or booleans, are refused with `422 invalid_spec`.',
      'An update (`takoform apply`, or PUT) replaces the whole spec.',
      '',
    );
  }
  lines.push(
    'In a `takoform apply` file (a reference may name a Resource of the same Space by name):',
    '',
    '```yaml',
    `- kind: ${kind}`,
    `  name: example`,
    `  spec: ${JSON.stringify(d.example)}`,
    '```',
    '',
    `The same reference on the command line: \`takoform explain ${kind}\`.`,
    '',
  );
  return lines.join('\n');
}

/** What `takoform explain KIND` prints. */
export function text(kind: Kind): string {
  const d = FORM_DOCS[kind];
  const fields = fieldsOf(d.schema);
  const out = [`${d.title} (kind ${kind}): ${d.url}`, '', d.summary.replaceAll('`', ''), ''];
  if (fields.length === 0) out.push('spec: exactly {} (no fields)', '');
  for (const f of fields) {
    const facts = [
      f.type === 'integer' ? `integer ${rangeOf(f)}` : `reference to a ${f.refersTo} {"resourceUid": …}`,
      f.required ? 'required' : `optional, default ${f.default ?? 'none'}`,
      f.updatable ? 'updatable' : 'fixed (delete and re-create to change)',
    ];
    out.push(`${f.name}: ${facts.join(', ')}`, `  ${f.description}`, '');
  }
  out.push(`example spec: ${JSON.stringify(d.example)}`, '');
  return out.join('\n');
}
