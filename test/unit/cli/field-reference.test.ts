import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FORM_DOCS, markdown, reference, text } from '../../../cli/field-reference.ts';
import { KIND_NAMES, type Kind } from '../../../cli/kinds.ts';
import { SpecError } from '../../../lambdas/engine/forms.ts';
import { parseQueueSpec } from '../../../lambdas/forms/at-least-once-queue/queue-spec.ts';
import { createModuleWorkerForm } from '../../../lambdas/forms/module-worker/module-worker-form.ts';
import {
  parseConsumerSpec,
  parseConsumerUpdate,
} from '../../../lambdas/forms/queue-consumer/consumer-spec.ts';

/**
 * The field reference (docs/forms/*.md, `takoform explain`) is rendered from the schemas the Host
 * validates with: the pages are what the schemas render to now, and every range, requirement,
 * default and updatability they state is what the Forms' validators do.
 */
const worker = createModuleWorkerForm({ lookup: async () => undefined });
const validators: Record<
  Kind,
  { create(spec: unknown): unknown; update(spec: unknown, current: never): unknown }
> = {
  queue: { create: parseQueueSpec, update: (spec) => parseQueueSpec(spec) },
  worker: {
    create: (spec) => worker.validateCreate(spec),
    update: (spec, cur) => worker.validateUpdate(spec, cur),
  },
  consumer: { create: parseConsumerSpec, update: parseConsumerUpdate },
};

/** A valid spec of each kind with every field, references by uid. */
const FULL: Record<Kind, Record<string, unknown>> = {
  queue: { messageRetentionSeconds: 3600, deliveryDelaySeconds: 5 },
  worker: {},
  consumer: {
    queue: { resourceUid: 'rQ' },
    worker: { resourceUid: 'rW' },
    maxBatchSize: 10,
    maxBatchTimeoutSeconds: 1,
    maxConcurrency: 2,
    maxRetries: 3,
    retryDelaySeconds: 5,
    deadLetterQueue: { resourceUid: 'rD' },
  },
};

const refused = (run: () => unknown) => expect(run).toThrow(SpecError);

describe('the field reference', () => {
  it.each(KIND_NAMES)('docs/forms/%s.md is what the schema renders to (npm run docs:forms)', (kind) => {
    const page = readFileSync(new URL(`../../../docs/forms/${kind}.md`, import.meta.url), 'utf8');
    expect(page).toBe(markdown(kind));
    for (const f of reference(kind).fields) {
      expect(page).toContain(`| \`${f.name}\` |`);
      expect(text(kind)).toContain(`${f.name}: `);
    }
  });

  it('AQ-01 QC-01 MW-01 states the ranges, requirements and defaults of the Forms', () => {
    const summary = (kind: Kind) =>
      Object.fromEntries(
        reference(kind).fields.map((f) => [
          f.name,
          [f.type, f.min, f.max, f.required, f.default, f.updatable],
        ]),
      );
    expect(summary('queue')).toEqual({
      messageRetentionSeconds: ['integer', 60, 1_209_600, true, undefined, true],
      deliveryDelaySeconds: ['integer', 0, 43_200, false, 0, true],
    });
    expect(summary('worker')).toEqual({});
    expect(summary('consumer')).toEqual({
      queue: ['reference', undefined, undefined, true, undefined, false],
      worker: ['reference', undefined, undefined, true, undefined, false],
      maxBatchSize: ['integer', 1, 100, true, undefined, true],
      maxBatchTimeoutSeconds: ['integer', 0, 60, true, undefined, true],
      maxConcurrency: ['integer', 1, 250, true, undefined, true],
      maxRetries: ['integer', 0, 100, true, undefined, true],
      retryDelaySeconds: ['integer', 0, 43_200, true, undefined, true],
      deadLetterQueue: ['reference', undefined, undefined, false, undefined, true],
    });
  });

  it.each(KIND_NAMES)('%s: what the reference says is what the Host validates', (kind) => {
    const v = validators[kind];
    const full = FULL[kind];
    expect(v.create(full)).toEqual(full);
    refused(() => v.create({ ...full, notAField: 1 }));
    for (const f of reference(kind).fields) {
      const without = { ...full };
      delete without[f.name];
      if (f.required) refused(() => v.create(without));
      else expect(v.create(without)).toEqual(without);
      if (f.type === 'integer') {
        const min = f.min as number;
        const max = f.max as number;
        for (const ok of [min, max])
          expect(v.create({ ...full, [f.name]: ok })).toMatchObject({ [f.name]: ok });
        for (const bad of [min - 1, max + 1, 1.5 + min, `${min}`, null, true]) {
          refused(() => v.create({ ...full, [f.name]: bad }));
        }
      } else {
        refused(() => v.create({ ...full, [f.name]: { resourceUid: 'rX', extra: 1 } }));
        refused(() => v.create({ ...full, [f.name]: 'rX' }));
      }
      // QC-07: a field the reference calls fixed is refused on update when changed; the others change.
      const changed =
        f.type === 'integer'
          ? { ...full, [f.name]: (full[f.name] as number) === f.min ? (f.max as number) : (f.min as number) }
          : { ...full, [f.name]: { resourceUid: 'rOther' } };
      if (f.updatable) expect(v.update(changed, full as never)).toEqual(changed);
      else refused(() => v.update(changed, full as never));
    }
  });

  it('refusals name the field and what is wrong with it', () => {
    const spec = FULL.consumer;
    const message = (value: unknown) => {
      try {
        parseConsumerSpec(value);
      } catch (err) {
        return (err as Error).message;
      }
      return 'accepted';
    };
    expect(message({ ...spec, maxBatchSize: undefined })).toBe('maxBatchSize is required');
    expect(message({ ...spec, maxBatchSize: '10' })).toBe('maxBatchSize must be an integer');
    expect(message({ ...spec, maxBatchSize: 101 })).toBe('maxBatchSize must be in 1..100');
    expect(message({ ...spec, maxBatchsize: 10 })).toBe('spec has an unknown field "maxBatchsize"');
    expect(message({ ...spec, queue: 'rQ' })).toBe('queue must be a JSON object');
    expect(message({ ...spec, queue: {} })).toBe('queue.resourceUid is required');
    expect(message({ ...spec, queue: { resourceUid: 'a b' } })).toBe(
      'queue.resourceUid must be a Resource uid',
    );
    expect(message(null)).toBe('spec must be a JSON object');
    expect(message({ ...spec, deadLetterQueue: spec.queue })).toBe(
      'deadLetterQueue must not be the consumer’s own queue',
    );
    expect(() => parseQueueSpec({})).toThrow('messageRetentionSeconds is required');
    expect(Object.keys(FORM_DOCS)).toEqual(KIND_NAMES);
  });
});
