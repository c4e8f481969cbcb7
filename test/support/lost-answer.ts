/**
 * A lost answer as AWS produces it: the request reaches the service and takes effect, then the
 * connection drops before the answer arrives, and the SDK's retry strategy sends the request
 * again (a reset connection is a transient error). The middleware sits right after the SDK's
 * retry middleware, so every try passes through it: a chosen try is sent (`await next`), and its
 * answer replaced by the error. The stand-ins never do this by themselves.
 */

interface Args {
  input: Record<string, unknown>;
}
type Handler = (args: Args) => Promise<unknown>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;
interface Stack {
  addRelativeTo(middleware: Middleware, options: Record<string, unknown>): void;
  remove(name: string): boolean;
}

/** What a dropped connection looks like to the SDK: a Node.js socket error it retries. */
export function connectionReset(): Error {
  return Object.assign(new Error('read ECONNRESET (the answer was lost: injected by the test)'), {
    code: 'ECONNRESET',
    $metadata: {},
  });
}

let installed = 0;

/**
 * Loses the answer of the first `times` tries (default 1) of the client's requests that `match`
 * picks (by command name, e.g. `UpdateItemCommand`, and input), after they took effect.
 * `between` runs after such a try took effect and before its caller sees the error: what another
 * actor does before the SDK's retry. Returns how many were lost so far, and `remove` to take the
 * middleware off again.
 */
export function loseAnswers(
  client: { middlewareStack: unknown },
  match: (commandName: string, input: Record<string, unknown>) => boolean,
  opts: { times?: number; between?: () => Promise<unknown> } = {},
): { lost: () => number; remove: () => void } {
  const stack = client.middlewareStack as Stack;
  const name = `loseAnswer${++installed}`;
  const times = opts.times ?? 1;
  let lost = 0;
  stack.addRelativeTo(
    (next, context) => async (args) => {
      const out = await next(args);
      if (lost < times && match(context.commandName ?? '', args.input)) {
        lost++;
        await opts.between?.();
        throw connectionReset();
      }
      return out;
    },
    { name, relation: 'after', toMiddleware: 'retryMiddleware', override: true },
  );
  return { lost: () => lost, remove: () => void stack.remove(name) };
}
