/**
 * The refusals of Host API v2 as the engine and the Forms raise them: a problem code and its
 * HTTP status. The HTTP edge (http/problem.ts) turns them into problem+json; the core never
 * builds a response itself.
 */
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
