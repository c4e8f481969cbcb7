/**
 * The background refresh of `observed` (issue 14, Deliver 5) against a fake store: which
 * Resources it leaves alone, when an unchanged value is written again, and how a round's work is
 * bounded and continues where the last one stopped.
 */
import { describe, expect, it } from 'vitest';
import type { Form, FormRegistry } from '../../../lambdas/engine/forms.ts';
import type { JsonObject, ResourceRecord } from '../../../lambdas/engine/model.ts';
import { type ObservedStore, ResourceObserver } from '../../../lambdas/engine/resource-observer.ts';

const FORM = 'https://forms.test/Queue/';
const T0 = Date.parse('2026-12-01T12:00:00Z');

function resource(uid: string, over: Partial<ResourceRecord> = {}): ResourceRecord {
  return {
    uid,
    principal: 'p',
    form: FORM,
    space: 's',
    name: uid,
    generation: 1,
    observedGeneration: 1,
    observedAt: new Date(T0).toISOString(),
    phase: 'idle',
    spec: {},
    observed: { messageCount: 0 },
    output: {},
    lastOperation: 'op',
    ...over,
  } as ResourceRecord;
}

function fixture(resources: ResourceRecord[], look: (r: ResourceRecord) => Promise<JsonObject | undefined>) {
  const writes: { uid: string; observed: JsonObject; at: string }[] = [];
  const pages: (string | undefined)[] = [];
  const store: ObservedStore = {
    async listObservable(after, limit) {
      pages.push(after);
      const rest = resources.filter((r) => after === undefined || r.uid > after);
      const page = rest.slice(0, limit);
      return rest.length > limit ? { resources: page, next: page.at(-1)?.uid } : { resources: page };
    },
    async refreshObserved(uid, _generation, observed, at) {
      writes.push({ uid, observed, at });
      return true;
    },
  };
  const form = { url: FORM, observe: look } as unknown as Form;
  const forms: FormRegistry = new Map([[FORM, form]]);
  return { store, forms, writes, pages };
}

describe('ResourceObserver', () => {
  it('refreshes settled Resources only: none busy, deleted, failed, or ahead of what was observed', async () => {
    const all = [
      resource('a'),
      resource('b', { busyOperation: 'op2', phase: 'pending' }),
      resource('c', { deletedAt: new Date(T0).toISOString() }),
      resource('d', { phase: 'error' }),
      resource('e', { generation: 2, observedGeneration: 1 }),
    ];
    const f = fixture(all, async () => ({ messageCount: 3 }));
    const observer = new ResourceObserver({ store: f.store, forms: f.forms, clock: () => T0 + 1000 });
    expect(await observer.observeOnce()).toEqual({ seen: 5, refreshed: 1 });
    expect(f.writes).toEqual([
      { uid: 'a', observed: { messageCount: 3 }, at: new Date(T0 + 1000).toISOString() },
    ]);
  });

  it('a check that fails or cannot tell writes nothing, so observedAt is never refreshed by a failure', async () => {
    const f = fixture([resource('a'), resource('b')], async (r) => {
      if (r.uid === 'a') throw new Error('SQS is away');
      return undefined;
    });
    const observer = new ResourceObserver({ store: f.store, forms: f.forms, clock: () => T0 + 1000 });
    expect(await observer.observeOnce()).toEqual({ seen: 2, refreshed: 0 });
    expect(f.writes).toEqual([]);
  });

  it('an unchanged value is written again only once it is rewriteAfterMs old', async () => {
    let now = T0 + 60_000;
    const f = fixture([resource('a')], async () => ({ messageCount: 0 }));
    const observer = new ResourceObserver({
      store: f.store,
      forms: f.forms,
      clock: () => now,
      rewriteAfterMs: 600_000,
    });
    expect((await observer.observeOnce()).refreshed).toBe(0);
    now = T0 + 600_000;
    expect((await observer.observeOnce()).refreshed).toBe(1);
  });

  it('looks at no more than perRound Resources a round and goes on from there, then starts over', async () => {
    const f = fixture(
      ['a', 'b', 'c', 'd', 'e'].map((u) => resource(u)),
      async () => ({ messageCount: 1 }),
    );
    const observer = new ResourceObserver({ store: f.store, forms: f.forms, perRound: 2, clock: () => T0 });
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) seen.push((await observer.observeOnce()).seen);
    expect(seen).toEqual([2, 2, 1, 2]);
    expect(f.pages).toEqual([undefined, 'b', 'd', undefined]);
    expect(f.writes.map((w) => w.uid)).toEqual(['a', 'b', 'c', 'd', 'e', 'a', 'b']);
  });
});
