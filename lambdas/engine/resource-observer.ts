import { canonicalJson } from './canonical-json.ts';
import type { FormRegistry } from './forms.ts';
import type { JsonObject, ResourceRecord } from './model.ts';

/** What the background refresh needs of the Host's table. */
export interface ObservedStore {
  /** Live Resources in uid order after `after`, at most `limit`; `next` when more may follow. */
  listObservable(
    after: string | undefined,
    limit: number,
  ): Promise<{ resources: ResourceRecord[]; next?: string }>;
  /**
   * Writes `observed` and `observedAt` only, and only while the Resource still exists at
   * `generation` with no Operation under way and that generation observed; false otherwise.
   */
  refreshObserved(uid: string, generation: number, observed: JsonObject, at: string): Promise<boolean>;
}

export interface ObserverOptions {
  store: ObservedStore;
  forms: FormRegistry;
  clock?: () => number;
  /** Resources looked at per round at most; a larger Host is covered over several rounds. */
  perRound?: number;
  /** An unchanged `observed` is written again (a fresh `observedAt`) once it is this old. */
  rewriteAfterMs?: number;
}

export interface ObserverRound {
  seen: number;
  refreshed: number;
}

export const OBSERVER_DEFAULTS = { perRound: 200, rewriteAfterMs: 10 * 60_000 } as const;

/**
 * The background refresh of `observed` (queue `messageCount`, a consumer's `queueExists`,
 * `workerExists`, `consumerAttached`, a worker's `ready`). It never starts work and never writes
 * anything but `observed`/`observedAt`: a Resource with an Operation under way, or whose last
 * Operation failed, is left to the executor, and every write is conditional on the generation it
 * looked at, so an Operation accepted meanwhile always wins. Unchanged values are not written
 * again until they are `rewriteAfterMs` old, so an idle Host costs a read per Resource per round.
 */
export class ResourceObserver {
  private readonly o: Required<Omit<ObserverOptions, 'clock'>> & { clock: () => number };
  /** Where the next round continues; a round that reaches the end starts over next time. */
  private cursor: string | undefined;

  constructor(options: ObserverOptions) {
    this.o = {
      perRound: OBSERVER_DEFAULTS.perRound,
      rewriteAfterMs: OBSERVER_DEFAULTS.rewriteAfterMs,
      clock: Date.now,
      ...options,
    };
  }

  async observeOnce(): Promise<ObserverRound> {
    const round: ObserverRound = { seen: 0, refreshed: 0 };
    let page = await this.o.store.listObservable(this.cursor, this.o.perRound);
    if (page.resources.length === 0 && this.cursor !== undefined) {
      page = await this.o.store.listObservable(undefined, this.o.perRound);
    }
    this.cursor = page.next;
    for (const r of page.resources) {
      round.seen++;
      if (await this.refresh(r)) round.refreshed++;
    }
    return round;
  }

  private async refresh(r: ResourceRecord): Promise<boolean> {
    const settled =
      !r.deletedAt && !r.busyOperation && r.phase === 'idle' && r.observedGeneration === r.generation;
    const form = this.o.forms.get(r.form);
    if (!settled || !form?.observe) return false;
    const at = this.o.clock();
    // A backend that cannot be read now gives no answer; `observed` stays as it was until a later round.
    const observed = await form.observe(r).catch(() => undefined);
    if (!observed) return false;
    const age = r.observedAt ? at - Date.parse(r.observedAt) : Number.POSITIVE_INFINITY;
    if (canonicalJson(observed) === canonicalJson(r.observed) && age < this.o.rewriteAfterMs) return false;
    return this.o.store.refreshObserved(r.uid, r.generation, observed, new Date(at).toISOString());
  }
}
