/**
 * Operator commands for a deployed Host (host-profile §2, "Principals and API keys"):
 *
 *   npm run admin -- keys create --principal alice --space team-a=write [--space shared=read] [--label L]
 *   npm run admin -- keys revoke <key-hash-or-token>
 *
 * Options for both: `--table NAME` (default: $TAKOFORM_TABLE, e.g. the stack's TableName output),
 * `--region R`, `--endpoint URL` (LocalStack). AWS credentials come from the usual SDK chain.
 * `keys create` prints the new token once, on stdout, and nothing else there; the table stores
 * only its SHA-256. The token is never logged.
 */
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoApiKeys } from '../lambdas/adapters/aws/dynamodb-api-keys.ts';
import type { Access } from '../lambdas/engine/auth.ts';
import { ID_PATTERN } from '../lambdas/engine/ids.ts';

const USAGE = `usage:
  npm run admin -- keys create --principal ID --space SPACE=write|read [--space …] [--label TEXT] [--table NAME]
  npm run admin -- keys revoke KEY_HASH_OR_TOKEN [--table NAME]
common options: --table NAME (default $TAKOFORM_TABLE)  --region REGION  --endpoint URL`;

class UsageError extends Error {}

function parseSpaces(values: string[]): Record<string, Access> {
  if (values.length === 0) throw new UsageError('at least one --space SPACE=write|read is required');
  const spaces: Record<string, Access> = {};
  for (const v of values) {
    const m = /^([^=]+)=(read|write)$/.exec(v);
    if (!m?.[1] || !ID_PATTERN.test(m[1]))
      throw new UsageError(`--space ${JSON.stringify(v)}: expected SPACE=write|read`);
    if (Object.hasOwn(spaces, m[1])) throw new UsageError(`--space ${m[1]} given twice`);
    spaces[m[1]] = m[2] as Access;
  }
  return spaces;
}

export async function main(argv: string[], out = process.stdout, err = process.stderr): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        principal: { type: 'string' },
        space: { type: 'string', multiple: true },
        label: { type: 'string' },
        table: { type: 'string' },
        region: { type: 'string' },
        endpoint: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    err.write(`${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    (values.help ? out : err).write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  try {
    const [group, command, ...rest] = positionals;
    if (group !== 'keys' || (command !== 'create' && command !== 'revoke'))
      throw new UsageError(`unknown command`);
    const table = (values.table as string | undefined) ?? process.env.TAKOFORM_TABLE;
    if (!table)
      throw new UsageError('no table: pass --table NAME or set TAKOFORM_TABLE (the stack output TableName)');
    const endpoint = values.endpoint as string | undefined;
    const region = values.region as string | undefined;
    const client = new DynamoDBClient({ ...(region ? { region } : {}), ...(endpoint ? { endpoint } : {}) });
    const keys = new DynamoApiKeys(client, table);
    if (command === 'create') {
      if (rest.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(rest[0])}`);
      const principal = values.principal as string | undefined;
      if (!principal || !ID_PATTERN.test(principal))
        throw new UsageError('--principal ID is required (identifier grammar)');
      const spaces = parseSpaces((values.space as string[] | undefined) ?? []);
      const token = `tfk_${randomBytes(32).toString('base64url')}`;
      const record = await keys.put(token, principal, spaces, values.label as string | undefined);
      err.write(
        `created a key for ${principal} (${Object.entries(spaces)
          .map(([s, a]) => `${s}=${a}`)
          .join(', ')}); hash ${record.keyHash}\n`,
      );
      err.write('the token below is shown only now; store it safely\n');
      out.write(`${token}\n`);
      return 0;
    }
    if (rest.length !== 1 || !rest[0])
      throw new UsageError('keys revoke takes exactly one key hash or token');
    const removed = await keys.revoke(rest[0]);
    err.write(removed ? 'key revoked\n' : 'no such key\n');
    return removed ? 0 : 1;
  } catch (e) {
    if (e instanceof UsageError) {
      err.write(`${e.message}\n${USAGE}\n`);
      return 2;
    }
    // Name and code only: never echo what was passed in (it may be a token).
    const code = (e as { code?: unknown }).code;
    err.write(`failed: ${(e as Error).name}${typeof code === 'string' ? ` (${code})` : ''}\n`);
    return 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
