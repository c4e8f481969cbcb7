/** Numbers fixed by the Forms and this Host's profile (host-profile §3, §5). */
export const MESSAGE_LIMITS = {
  maxBodyBytes: 127_000,
  maxBatchMessages: 100,
  maxDelaySeconds: 43_200,
  /** SQS DelaySeconds and per-receive visibility bounds. */
  sqsMaxDelaySeconds: 900,
  sqsMaxVisibilitySeconds: 43_200,
  sqsMaxReceive: 10,
} as const;

/** SQS's longest message retention (14 days): what any queue of this Host can be set to. */
export const MAX_RETENTION_SECONDS = 1_209_600;

/**
 * When a record about a message (an attempts record, a commit) may expire: after the longest
 * retention any queue may have, the longest delay, and a day. Not the queue's retention at write
 * time: an update can raise the retention of messages already queued, and a record that expires
 * before its message would make a committed send look uncommitted or reset an attempts count.
 */
export function recordExpiry(nowMs: number): number {
  return Math.ceil(nowMs / 1000) + MAX_RETENTION_SECONDS + MESSAGE_LIMITS.maxDelaySeconds + 86_400;
}

/** Error names of producer calls (AtLeastOnceQueue 0.2.0). */
export type ProducerErrorName =
  | 'invalid_body'
  | 'message_too_large'
  | 'batch_too_large'
  | 'backend_unavailable';
/** Error names of settlement calls (ModuleWorker 0.3.0 §runtime). */
export type SettlementErrorName =
  | 'unknown_batch'
  | 'unknown_message'
  | 'already_settled'
  | 'backend_unavailable';

/** An Error whose `name` is one of the Forms' rejection names. */
export class NamedError extends Error {
  constructor(name: ProducerErrorName | SettlementErrorName | 'context_expired', message: string) {
    super(message);
    this.name = name;
  }
}
