/** `npm start`: runs the whole Host on this machine (host-profile §2). */
import { log } from '../shared/log.ts';
import { ConfigError, parseConfig, USAGE } from './config.ts';
import { DataDirInUseError } from './data-dir.ts';
import { startLocalHost } from './local-host.ts';
import { JavaMissingError } from './standins/dynamodb-local.ts';

const STOP_BOUND_MS = 15_000;

async function main(): Promise<number> {
  let config: ReturnType<typeof parseConfig>;
  try {
    config = parseConfig(process.argv.slice(2), process.env, process.cwd());
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (config === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const host = await startLocalHost(config);
  const ready: Record<string, string> = { origin: host.origin, baseUrl: host.baseUrl, dataDir: host.dataDir };
  if (host.apiKey) ready.apiKey = host.apiKey;
  process.stdout.write(`takoform-host ready ${JSON.stringify(ready)}\n`);

  const reason = await new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
    void host.standInDied.then((name) => resolve(`stand-in ${name} exited`));
  });
  log.info('stopping', { reason });
  const forced = setTimeout(() => {
    log.error('stop took too long; exiting', { boundMs: STOP_BOUND_MS });
    process.exit(1);
  }, STOP_BOUND_MS);
  await host.stop();
  clearTimeout(forced);
  return reason.startsWith('SIG') ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof ConfigError || err instanceof JavaMissingError || err instanceof DataDirInUseError) {
      process.stderr.write(`${err.message}\n`);
    } else {
      log.error('start-up failed', { err });
    }
    process.exit(1);
  },
);
