import { HostError, PROBLEM_STATUS, type ProblemCode } from '../engine/host-error.ts';
import type { HttpResponse } from './types.ts';

export { HostError, PROBLEM_STATUS, type ProblemCode };

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
