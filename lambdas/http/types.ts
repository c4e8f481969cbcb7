/**
 * The transport-neutral request and response the HTTP core works on. The local server and the
 * API Gateway adapter both translate to and from these, so routing, validation and Problem
 * mapping exist once.
 */
export interface HttpRequest {
  readonly method: string;
  /** The path as received, percent-encoded, without the query string. */
  readonly path: string;
  /** The raw query string without the leading `?`, or '' when there is none. */
  readonly rawQuery: string;
  /** Header names lower-cased; a header sent several times is kept as a list. */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The request body bytes, or undefined when the request had none. */
  readonly body: Uint8Array | undefined;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function headerValue(req: HttpRequest, name: string): string | undefined {
  const v = req.headers[name];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.join(', ');
}

/** Whether a header was sent more than once (only possible for some transports). */
export function headerRepeated(req: HttpRequest, name: string): boolean {
  const v = req.headers[name];
  return Array.isArray(v) && v.length > 1;
}
