/**
 * `takoform`: the command line of this Host (host-profile §6). Installed, `bin/takoform.js` runs
 * the compiled `main()`; in a clone `bin/takoform` starts this file with Node 24 in the caller's folder.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { apply } from './apply.ts';
import { type CommonFlags, type Context, createContext } from './context.ts';
import { dev } from './dev.ts';
import { EXIT, RefusedError, UsageError } from './errors.ts';
import { reference, text } from './field-reference.ts';
import { peek, purge, redrive, send, status } from './queue-commands.ts';
import { get, parseKind, remove } from './resource-commands.ts';

const DEFAULT_TIMEOUT_SECONDS = 300;

function integer(min: number, max: number) {
  return (raw: string): number => {
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new InvalidArgumentError(`must be an integer in ${min}..${max}`);
    }
    return Number(raw);
  };
}

/** The connection, Space and output flags: the program's, so they may stand before or after the command. */
function common(cmd: Command): Command {
  return cmd
    .addOption(
      new Option('--origin <url>', 'the Host to talk to (else TAKOFORM_ORIGIN, else the local Host)'),
    )
    .addOption(new Option('--key <key>', 'API key (else TAKOFORM_API_KEY, else the local dev key)'))
    .addOption(new Option('--data-dir <dir>', "the local Host's data folder (default: .data)"))
    .addOption(
      new Option('--profile <name>', 'a named Host of ~/.config/takoform/config (else TAKOFORM_PROFILE)'),
    )
    .addOption(new Option('--space <space>', 'the Space (default: the only one the key can write)'))
    .addOption(new Option('--json', 'print one JSON document on stdout'));
}

type Flags = CommonFlags & Record<string, unknown>;

/** Runs a command body with its context; every outcome becomes an exit code. */
function action(body: (ctx: Context, flags: Flags, ...args: string[]) => Promise<void>) {
  return async (...received: unknown[]) => {
    const cmd = received.at(-1) as Command;
    const flags = cmd.optsWithGlobals<Flags>();
    const args = received.slice(0, -2) as string[];
    await body(createContext(flags), flags, ...args);
  };
}

const timeoutOf = (flags: Flags) => ((flags.timeout as number | undefined) ?? DEFAULT_TIMEOUT_SECONDS) * 1000;
const timeoutOption = () =>
  new Option('--timeout <seconds>', 'how long to wait for Operations').argParser(integer(1, 3600));

/** Commands that need no Host: the field reference, and running a local Host. */
function addLocalCommands(root: Command): void {
  root
    .command('explain')
    .description("a kind's spec fields: type, range, default, whether an update may change them")
    .argument('<kind>', 'queue, worker or consumer')
    .action(async (kind: string, _o: unknown, cmd: Command) => {
      const k = parseKind(kind);
      const asJson = cmd.optsWithGlobals<Flags>().json === true;
      process.stdout.write(asJson ? `${JSON.stringify(reference(k), null, 2)}\n` : text(k));
    });

  root
    .command('dev')
    .description('run a local Host (DynamoDB Local, an SQS stand-in, Step Functions Local) until Ctrl-C')
    .option('--port <port>', 'listen on 127.0.0.1:PORT (default 8787; 0 takes a free port)')
    .option('--workers-dir <dir>', 'ModuleWorker code, DIR/<space>/<name>.mjs (default workers)')
    .option('--public-origin <url>', 'the origin advertised to clients')
    .option('--principals <file>', 'principals and API keys (default: a generated development key)')
    .option('--worker-timeout <seconds>', 'cut off a hung worker invocation after this long (900)')
    .action(async (_o: unknown, cmd: Command) => {
      const f = cmd.optsWithGlobals<Flags>();
      const code = await dev({
        ...(f.port !== undefined ? { port: f.port as string } : {}),
        ...(f.dataDir !== undefined ? { dataDir: f.dataDir } : {}),
        ...(f.workersDir !== undefined ? { workersDir: f.workersDir as string } : {}),
        ...(f.publicOrigin !== undefined ? { publicOrigin: f.publicOrigin as string } : {}),
        ...(f.principals !== undefined ? { principals: f.principals as string } : {}),
        ...(f.workerTimeout !== undefined ? { workerTimeout: f.workerTimeout as string } : {}),
      });
      if (code !== 0) throw new HostExit(code);
    });
}

export function program(): Command {
  const root = common(new Command('takoform'))
    .description('Manage queues, workers and consumers on a Takoform Host, and look at their messages.')
    .exitOverride()
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError('(run with --help for usage)');

  root
    .command('apply')
    .description('create or update the Resources of a file (JSON, or YAML by .yaml/.yml), in order')
    .requiredOption('-f, --file <file>', 'the file: {"space":…,"resources":[{"kind","name","spec"}]}')
    .addOption(timeoutOption())
    .action(action((ctx, f) => apply(ctx, { file: f.file as string, timeoutMs: timeoutOf(f) })));

  root
    .command('get')
    .description('list Resources (of one KIND), or show one')
    .argument('[kind]', 'queue, worker or consumer (or a NAME alone)')
    .argument('[name]')
    .action(action((ctx, _f, kind, name) => get(ctx, kind, name)));

  root
    .command('delete')
    .description('delete a Resource by name and wait until it is gone')
    .argument('<kind>', 'queue, worker or consumer')
    .argument('<name>')
    .addOption(timeoutOption())
    .action(action((ctx, f, kind, name) => remove(ctx, kind as string, name as string, timeoutOf(f))));

  root
    .command('send')
    .description('send one message: TEXT as UTF-8, or the bytes of --file (- for stdin)')
    .argument('<queue>')
    .argument('[text]')
    .option('--file <file>', 'send the bytes of this file')
    .addOption(new Option('--delay <seconds>', 'deliver no earlier than this').argParser(integer(0, 43_200)))
    .action(
      action((ctx, f, queue, text) =>
        send(ctx, queue as string, text, {
          ...(f.file !== undefined ? { file: f.file as string } : {}),
          ...(f.delay !== undefined ? { delay: f.delay as number } : {}),
        }),
      ),
    );

  root
    .command('status')
    .description('per queue: counts, its consumer and its dead-letter queue')
    .argument('[queue]')
    .action(action((ctx, _f, queue) => status(ctx, queue)));

  const dlq = root.command('dlq').description('look at and move the messages of a (dead-letter) queue');
  dlq
    .command('peek')
    .description('show messages without consuming them')
    .argument('<queue>')
    .addOption(new Option('--limit <n>', 'at most this many (1..50, default 10)').argParser(integer(1, 50)))
    .option('--from <queue>', 'only dead letters moved from this queue')
    .option(
      '--outcome <outcome>',
      'only dead letters whose last delivery ended so (threw, returned/retry, …)',
    )
    .action(
      action((ctx, f, queue) =>
        peek(ctx, queue as string, {
          ...(f.limit !== undefined ? { limit: f.limit as number } : {}),
          ...(f.from !== undefined ? { from: f.from as string } : {}),
          ...(f.outcome !== undefined ? { outcome: f.outcome as string } : {}),
        }),
      ),
    );
  dlq
    .command('redrive')
    .description('move messages to another queue as new messages (copy, then delete)')
    .argument('<queue>')
    .requiredOption('--to <queue>', 'the queue to move them to')
    .addOption(new Option('--limit <n>', 'at most this many (default: all)').argParser(integer(1, 1_000_000)))
    .option('--id <ids...>', 'only these messages (ids from dlq peek); the rest stay')
    .action(
      action((ctx, f, queue) =>
        redrive(ctx, queue as string, f.to as string, {
          ...(f.limit !== undefined ? { limit: f.limit as number } : {}),
          ...(f.id !== undefined ? { ids: f.id as string[] } : {}),
        }),
      ),
    );

  root
    .command('purge')
    .description('delete every message of a queue, or only the chosen ones')
    .argument('<queue>')
    .option('--yes', 'confirm')
    .option('--id <ids...>', 'only these messages (ids from dlq peek)')
    .action(
      action((ctx, f, queue) => purge(ctx, queue as string, f.yes === true, f.id as string[] | undefined)),
    );

  addLocalCommands(root);
  return root;
}

/** The local Host ended with this code; passed on as the command's. */
class HostExit extends Error {
  readonly code: number;
  constructor(code: number) {
    super(`the local Host exited with ${code}`);
    this.code = code;
  }
}

/** Parses and runs; resolves to the exit code (host-profile §6). */
export async function run(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version asked for are successes; everything else commander refuses is usage.
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version'
        ? EXIT.ok
        : EXIT.usage;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`takoform: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof HostExit) return err.code;
    if (err instanceof RefusedError) {
      process.stderr.write(`takoform: ${err.code}: ${err.detail}\n`);
      return EXIT.refused;
    }
    process.stderr.write(`takoform: unexpected error: ${(err as Error)?.name ?? 'error'}\n`);
    return EXIT.refused;
  }
}

/**
 * Stdout or stderr closed by the reader (`takoform status | head -3`): the rest is not wanted, so
 * the command ends quietly with success instead of an unhandled EPIPE.
 */
function endQuietlyOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      process.exit(EXIT.ok);
    });
  }
}

/** The installed command (`bin/takoform.js`) and the clone's launcher both come here. */
export async function main(argv: string[]): Promise<number> {
  endQuietlyOnClosedPipe();
  return run(argv);
}

if (import.meta.main) {
  // The launcher runs Node in the project folder; paths on the command line are the caller's.
  if (process.env.TAKOFORM_CLI_CWD) process.chdir(process.env.TAKOFORM_CLI_CWD);
  process.exitCode = await main(process.argv.slice(2));
}
