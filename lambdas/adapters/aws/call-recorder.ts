/**
 * A record of every AWS SDK call, for the IAM simulation test (test/integration/aws/
 * iam-recorded-calls.test.ts): which function's entry made it, the service, the operation and its
 * input. Off unless a test installs a listener with `recordAwsCalls` before the clients are built;
 * then `withCallRecorder` adds one `initialize`-step middleware. Otherwise it returns the client
 * untouched, so Lambda functions pay nothing.
 *
 * Calls are attributed through an AsyncLocalStorage: a test runs each entry inside
 * `asFunction(name, …)`, and every call made from there (awaited or in the background) carries
 * that name, even when several functions share one client.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** The IAM service prefix of each client the Host uses. */
export type RecordedService =
  | 'dynamodb'
  | 'sqs'
  | 'lambda'
  | 'states'
  | 'cloudwatch'
  | 'secretsmanager'
  | 'ssm';

export interface RecordedCall {
  /** The function whose entry made the call (`asFunction`), undefined outside any. */
  readonly fn: string | undefined;
  readonly service: RecordedService;
  /** The API operation, e.g. `TransactWriteItems`, `SendMessageBatch`, `Invoke`. */
  readonly operation: string;
  readonly input: Readonly<Record<string, unknown>>;
}

type Listener = (call: RecordedCall) => void;

let listener: Listener | undefined;
const currentFunction = new AsyncLocalStorage<string>();

/** Test hook: reports every call of the clients built from now on; returns the uninstall. */
export function recordAwsCalls(l: Listener): () => void {
  if (listener) throw new Error('an AWS call recorder is already installed');
  listener = l;
  return () => {
    listener = undefined;
  };
}

/** Runs `run` as the entry of function `name`: the calls it makes are attributed to it. */
export function asFunction<T>(name: string, run: () => T): T {
  return currentFunction.run(name, run);
}

/**
 * Runs `run` as no function's: for calls a local stand-in's courtesy check makes on its own
 * (strict-sqs.ts), which no function makes on AWS.
 */
export function asNoFunction<T>(run: () => T): T {
  return currentFunction.exit(run);
}

interface MiddlewareStackLike {
  add(
    middleware: (
      next: (args: { input: object }) => Promise<unknown>,
      context: { commandName?: string },
    ) => (args: { input: object }) => Promise<unknown>,
    options: { step: 'initialize'; priority: 'high'; name: string; override: boolean },
  ): void;
}

/** `client` with the recorder when one is installed; else `client` itself. */
export function withCallRecorder<C extends { middlewareStack: unknown }>(
  client: C,
  service: RecordedService,
): C {
  if (!listener) return client;
  (client.middlewareStack as MiddlewareStackLike).add(
    (next, context) => async (args) => {
      listener?.({
        fn: currentFunction.getStore(),
        service,
        operation: (context.commandName ?? '').replace(/Command$/, ''),
        input: args.input as Record<string, unknown>,
      });
      return next(args);
    },
    // First in the initialize step: the request as the code made it, before fault injection
    // rewrites a batch.
    { step: 'initialize', priority: 'high', name: 'takoformCallRecorder', override: true },
  );
  return client;
}
