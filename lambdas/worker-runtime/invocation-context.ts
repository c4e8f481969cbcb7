import { NamedError } from '../delivery/limits.ts';

/** The `ctx` argument of a handler (ModuleWorker 0.3.0 §runtime): only `waitUntil`. */
export interface ExecutionContext {
  waitUntil(promise: unknown): void;
}

/** The Host's side of one invocation's `ctx`. Worker code only ever sees `ctx`. */
export interface InvocationContext {
  /** Frozen; its one own property is `waitUntil`. */
  readonly ctx: ExecutionContext;
  /**
   * Resolves once every promise registered so far has settled, including promises registered
   * while waiting (a `waitUntil` callback may register more). Never rejects.
   */
  settled(): Promise<void>;
  /** Ends the context: later `waitUntil` calls throw `context_expired`. */
  expire(): void;
  readonly expired: boolean;
  /** The rejection reasons of registered promises, for diagnostics only. */
  readonly rejections: readonly unknown[];
}

/**
 * `waitUntil(promise)` registers follow-up work: the invocation does not end (and the thread is
 * not reused or reclaimed) until it settles. Any value is accepted and treated as
 * `Promise.resolve(value)` would treat it, like `await`. A rejection is recorded, never thrown,
 * and does not change how the handler's own outcome was judged.
 *
 * Registering after `expire()` throws `NamedError('context_expired')` synchronously: the spec says
 * registering "fails", and `waitUntil` returns nothing a caller could observe a rejection on, so a
 * throw is the only failure a caller can see (a returned rejected Promise would go unnoticed and
 * surface as an unhandled rejection instead).
 */
export function createInvocationContext(): InvocationContext {
  const pending = new Set<Promise<void>>();
  const rejections: unknown[] = [];
  let expired = false;

  const waitUntil = (promise: unknown): void => {
    if (expired) throw new NamedError('context_expired', 'this invocation has ended');
    const tracked = Promise.resolve(promise).then(
      () => undefined,
      (reason: unknown) => {
        rejections.push(reason);
      },
    );
    pending.add(tracked);
    void tracked.finally(() => pending.delete(tracked));
  };

  return {
    ctx: Object.freeze({ waitUntil: Object.freeze(waitUntil) }),
    async settled() {
      while (pending.size > 0) await Promise.all([...pending]);
    },
    expire() {
      expired = true;
    },
    get expired() {
      return expired;
    },
    get rejections() {
      return rejections.slice();
    },
  };
}
