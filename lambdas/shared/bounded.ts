/**
 * Runs `work` over `items` with at most `limit` calls in flight, in the items' order: item i
 * starts only after items 0..i-1 did. `goOn(i)` is asked before item i starts; once it says no, or a
 * call threw, no further item starts, and those under way finish. Resolves to how many items were
 * started — always the first ones — or rejects with the first error once none is under way.
 */
export async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<void>,
  goOn: (index: number) => boolean = () => true,
): Promise<number> {
  let next = 0;
  let stopped = false;
  let failure: { err: unknown } | undefined;
  const runner = async () => {
    while (!stopped && next < items.length) {
      if (!goOn(next)) {
        stopped = true;
        return;
      }
      const i = next++;
      try {
        await work(items[i] as T, i);
      } catch (err) {
        stopped = true;
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, runner));
  if (failure) throw failure.err;
  return next;
}
