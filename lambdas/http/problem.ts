import type { HttpResponse } from './types.ts';

/** Problem codes of Host API v2 (and this Host's profile), with their HTTP status. */
export const PROBLEM_STATUS = {
  invalid_request: 400,
  invalid_body: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  capability_unavailable: 404,
  method_not_allowed: 405,
  name_conflict: 409,
  generation_conflict: 409,
  resource_busy: 409,
  idempotency_conflict: 409,
  offering_changed: 409,
  dependency_conflict: 409,
  private_inputs_conflict: 409,
  private_inputs_unverifiable: 409,
  operation_terminal: 409,
  cursor_expired: 409,
  gone: 410,
  request_too_large: 413,
  message_too_large: 413,
  batch_too_large: 413,
  unsupported_media_type: 415,
  unsupported_form: 422,
  invalid_spec: 422,
  capability_required: 422,
  expected_generation_required: 428,
  rate_limited: 429,
  internal_error: 500,
  temporarily_unavailable: 503,
  backend_unavailable: 503,
} as const;

export type ProblemCode = keyof typeof PROBLEM_STATUS;

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  503: 'Service Unavailable',
};

/**
 * A refusal the Host means to send. Its `detail` is written by this Host and must never carry
 * raw exception text, secrets or another principal's data.
 */
export class HostError extends Error {
  override name = 'HostError';
  readonly status: number;
  readonly code: ProblemCode;
  readonly detail: string | undefined;
  readonly extraHeaders: Record<string, string>;
  constructor(code: ProblemCode, detail?: string, extraHeaders: Record<string, string> = {}) {
    super(detail ? `${code}: ${detail}` : code);
    this.code = code;
    this.detail = detail;
    this.extraHeaders = extraHeaders;
    this.status = PROBLEM_STATUS[code];
  }
}

export function problemResponse(err: HostError): HttpResponse {
  const body: Record<string, unknown> = {
    type: 'about:blank',
    title: TITLES[err.status] ?? 'Internal Server Error',
    status: err.status,
    code: err.code,
  };
  if (err.detail) body.detail = err.detail;
  return {
    status: err.status,
    headers: {
      'content-type': 'application/problem+json',
      'cache-control': 'no-store',
      ...err.extraHeaders,
    },
    body: JSON.stringify(body),
  };
}

/** The answer to anything unexpected: a fixed text, never the exception's. */
export function internalErrorResponse(): HttpResponse {
  return problemResponse(new HostError('internal_error'));
}
