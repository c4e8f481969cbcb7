import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { HttpHandler } from './handler.ts';
import type { HttpRequest } from './types.ts';

/**
 * API Gateway (REST, proxy integration) does not pass the raw query string, so it is rebuilt
 * from the multi-value map: repeated parameters stay repeated, which the core refuses.
 */
function rawQueryOf(event: APIGatewayProxyEvent): string {
  const multi = event.multiValueQueryStringParameters ?? {};
  const parts: string[] = [];
  for (const [name, values] of Object.entries(multi)) {
    for (const value of values ?? []) {
      parts.push(`${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
    }
  }
  return parts.join('&');
}

export function toHttpRequest(event: APIGatewayProxyEvent): HttpRequest {
  const headers: Record<string, string[]> = {};
  for (const [name, values] of Object.entries(event.multiValueHeaders ?? {})) {
    if (values) headers[name.toLowerCase()] = [...(headers[name.toLowerCase()] ?? []), ...values];
  }
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (value !== undefined && !headers[name.toLowerCase()]) headers[name.toLowerCase()] = [value];
  }
  const body =
    event.body === null || event.body === undefined
      ? undefined
      : new Uint8Array(Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8'));
  return { method: event.httpMethod, path: event.path, rawQuery: rawQueryOf(event), headers, body };
}

export function apiGatewayAdapter(core: HttpHandler) {
  return async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
    const out = await core(toHttpRequest(event));
    return { statusCode: out.status, headers: out.headers, body: out.body };
  };
}
