/**
 * An HTTP proxy in front of a DynamoDB endpoint (DynamoDB Local, or a single-endpoint emulator)
 * that holds every request to DynamoDB's throughput physics (dynamodb-physics.ts). It sits on
 * the wire rather than in an SDK client so that every client of the endpoint (the Host's, the
 * worker threads', a test's own) meets the same in-flight transactions and partition budgets,
 * and so that a transaction is in flight for as long as it really is: from the request's arrival
 * until its answer leaves, held at least `holdMs`. Requests to other services pass untouched.
 *
 * `GET /takoform-physics` answers what the model counted (conflicts by item, throttles, the
 * partitions that consumed most), for a test or an operator in another process.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { log } from '../../shared/log.ts';
import type { TableSchema } from './dynamodb-items.ts';
import { DynamoPhysics, isRefusal, type PhysicsStats, type Ticket } from './dynamodb-physics.ts';
import type { Physics } from './physics-config.ts';

const TARGET_PREFIX = 'DynamoDB_20120810.';
export const STATS_PATH = '/takoform-physics';

export interface PhysicsProxy {
  endpoint: string;
  port: number;
  model: DynamoPhysics;
  stats(): PhysicsStats;
  stop(): Promise<void>;
}

type Body = Record<string, unknown>;

/** The tables a request names. */
function tablesOf(body: Body): string[] {
  const out = new Set<string>();
  if (typeof body.TableName === 'string') out.add(body.TableName);
  for (const t of Object.keys((body.RequestItems as Body | undefined) ?? {})) out.add(t);
  for (const action of (body.TransactItems as Body[] | undefined) ?? [])
    for (const a of Object.values(action)) {
      const name = (a as Body | undefined)?.TableName;
      if (typeof name === 'string') out.add(name);
    }
  return [...out];
}

function schemaOf(table: Body): TableSchema | undefined {
  const keyOf = (ks: { AttributeName: string; KeyType: string }[] | undefined) => ({
    pk: ks?.find((k) => k.KeyType === 'HASH')?.AttributeName,
    sk: ks?.find((k) => k.KeyType === 'RANGE')?.AttributeName,
  });
  const main = keyOf(table.KeySchema as never);
  if (!main.pk || typeof table.TableName !== 'string') return undefined;
  const indexes = ((table.GlobalSecondaryIndexes as Body[] | undefined) ?? []).flatMap((g) => {
    const k = keyOf(g.KeySchema as never);
    return k.pk ? [{ name: g.IndexName as string, pk: k.pk, ...(k.sk ? { sk: k.sk } : {}) }] : [];
  });
  return { table: table.TableName, pk: main.pk, ...(main.sk ? { sk: main.sk } : {}), indexes };
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

class Forwarder {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  private readonly target: URL;
  constructor(target: string) {
    this.target = new URL(target);
  }

  send(method: string, path: string, headers: http.IncomingHttpHeaders, body: Buffer): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          agent: this.agent,
          hostname: this.target.hostname,
          port: this.target.port,
          method,
          path,
          headers: { ...headers, host: this.target.host, 'content-length': String(body.length) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 500, headers: res.headers, body: Buffer.concat(chunks) }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Table schemas, read from the endpoint the first time a table is named (and after it changes). */
class Schemas {
  readonly known = new Map<string, TableSchema>();
  private readonly missing = new Map<string, number>();
  private readonly forwarder: Forwarder;
  constructor(forwarder: Forwarder) {
    this.forwarder = forwarder;
  }

  async ensure(tables: string[], headers: http.IncomingHttpHeaders): Promise<void> {
    const now = Date.now();
    const unknown = tables.filter((t) => !this.known.has(t) && (this.missing.get(t) ?? 0) < now);
    await Promise.all(unknown.map((t) => this.describe(t, headers, now)));
  }

  private async describe(table: string, headers: http.IncomingHttpHeaders, now: number): Promise<void> {
    // DynamoDB Local and the emulators do not check signatures: the caller's headers will do.
    const body = Buffer.from(JSON.stringify({ TableName: table }));
    try {
      const out = await this.forwarder.send(
        'POST',
        '/',
        { ...headers, 'x-amz-target': `${TARGET_PREFIX}DescribeTable` },
        body,
      );
      const schema =
        out.status === 200 ? schemaOf((JSON.parse(out.body.toString()) as Body).Table as Body) : undefined;
      if (schema) this.known.set(table, schema);
      else this.missing.set(table, now + 1_000);
    } catch {
      this.missing.set(table, now + 1_000);
    }
  }

  forget(table: string): void {
    this.known.delete(table);
    this.missing.delete(table);
  }
}

/** Waits `ms`, or not at all when the time has passed already (a negative delay only warns). */
const wait = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());
let refusals = 0;

function parseJson(buf: Buffer): Body | undefined {
  try {
    const v = JSON.parse(buf.toString('utf8'));
    return v && typeof v === 'object' ? (v as Body) : undefined;
  } catch {
    return undefined;
  }
}

export async function startDynamoDbPhysicsProxy(opts: {
  target: string;
  physics: Physics;
  port?: number;
}): Promise<PhysicsProxy> {
  const model = new DynamoPhysics(opts.physics);
  const forwarder = new Forwarder(opts.target);
  const schemas = new Schemas(forwarder);

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => {
    if (req.method === 'GET' && req.url === STATS_PATH) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(model.snapshot(20)));
      return;
    }
    const target = req.headers['x-amz-target'];
    const op =
      typeof target === 'string' && target.startsWith(TARGET_PREFIX)
        ? target.slice(TARGET_PREFIX.length)
        : undefined;
    const parsed = op ? parseJson(body) : undefined;
    let ticket: Ticket | undefined;
    if (op && parsed) {
      const tables = tablesOf(parsed);
      if (/^(Create|Delete|Update)Table$/.test(op)) for (const t of tables) schemas.forget(t);
      else await schemas.ensure(tables, req.headers);
      const decision = model.begin(op, parsed, schemas.known);
      if (isRefusal(decision)) {
        res
          .writeHead(400, {
            'content-type': 'application/x-amz-json-1.0',
            'x-amzn-requestid': `takoform-physics-${(++refusals).toString(36)}`,
            'x-amzn-errortype': decision.type,
          })
          .end(JSON.stringify(decision.body));
        return;
      }
      ticket = decision;
    }
    let answer: Answer;
    try {
      answer = await forwarder.send(req.method ?? 'POST', req.url ?? '/', req.headers, body);
    } catch (err) {
      if (ticket) model.finish(ticket, undefined, schemas.known);
      // The endpoint is down: the caller sees its connection fail, as it would without the proxy.
      log.debug('physics proxy: endpoint unreachable', { err });
      req.socket.destroy();
      return;
    }
    if (ticket) {
      if (ticket.transaction) await wait(ticket.startedAt + opts.physics.holdMs - Date.now());
      const plain = answer.status === 200 && !answer.headers['content-encoding'];
      model.finish(ticket, plain ? parseJson(answer.body) : undefined, schemas.known);
    }
    res.writeHead(answer.status, answer.headers).end(answer.body);
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch((err) => {
        log.warn('physics proxy: request failed', { err });
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    model,
    stats: () => model.snapshot(20),
    stop: () =>
      new Promise<void>((resolve) => {
        forwarder.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
