import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LIMITS } from './discovery.ts';
import type { HttpHandler } from './handler.ts';
import { HostError, problemResponse } from './problem.ts';
import type { HttpRequest, HttpResponse } from './types.ts';

/** Bytes read past the advertised limit before a body is refused: enough to tell "too large". */
const BODY_CAP = LIMITS.maxRequestBytes + 1;

async function readBody(req: http.IncomingMessage): Promise<Uint8Array | undefined | 'too_large'> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > LIMITS.maxRequestBytes) return 'too_large';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_CAP) return 'too_large';
    chunks.push(chunk);
  }
  if (size === 0 && declared === undefined && req.headers['transfer-encoding'] === undefined)
    return undefined;
  return new Uint8Array(Buffer.concat(chunks));
}

function send(res: http.ServerResponse, out: HttpResponse, head: boolean): void {
  res.writeHead(out.status, { ...out.headers, 'content-length': Buffer.byteLength(out.body) });
  res.end(head ? undefined : out.body);
}

export interface LocalHttpServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Serves the HTTP core on 127.0.0.1 only. */
export async function startNodeServer(handler: HttpHandler, port: number): Promise<LocalHttpServer> {
  const server = http.createServer({ requestTimeout: 30_000, headersTimeout: 10_000 }, async (req, res) => {
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const body = await readBody(req).catch(() => 'too_large' as const);
    if (body === 'too_large') {
      res.setHeader('connection', 'close');
      send(res, problemResponse(new HostError('request_too_large')), false);
      return;
    }
    const request: HttpRequest = {
      method: req.method ?? 'GET',
      path: q === -1 ? rawUrl : rawUrl.slice(0, q),
      rawQuery: q === -1 ? '' : rawUrl.slice(q + 1),
      headers: req.headersDistinct as HttpRequest['headers'],
      body,
    };
    const out = await handler(request);
    send(res, out, request.method === 'HEAD');
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const actual = (server.address() as AddressInfo).port;
  return {
    port: actual,
    close: async () => {
      server.closeAllConnections();
      server.close();
      // Rejects only if 'close' already fired: the server is closed either way.
      await once(server, 'close').catch(() => undefined);
    },
  };
}
