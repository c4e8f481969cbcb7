import type { QueueDirectory, QueueTarget } from '../../delivery/ports.ts';
import type { ResourceRecord } from '../../engine/model.ts';
import { parseQueueSpec } from '../../forms/at-least-once-queue/queue-spec.ts';
import { FORM_URLS } from '../../forms/form-urls.ts';

export interface DynamoQueueDirectoryOptions {
  /** The Host store's Resource read (`DynamoHostStore.getResource`, a consistent read). */
  getResource(uid: string): Promise<ResourceRecord | undefined>;
  /** The SQS URL of a queue Resource, undefined while no queue exists (`SqsQueueBackend.queueUrl`). */
  queueUrl(uid: string): Promise<string | undefined>;
}

/** URLs kept per process; a queue's URL never changes while its Resource lives. */
const MAX_CACHED_URLS = 10_000;

/**
 * Live AtLeastOnceQueue Resources as producers and the dispatcher address them. The Resource is
 * read on every lookup (so a deleted or deleting queue is refused at once); only SQS URLs are
 * cached, since they are derived from the uid and cannot change.
 */
export class DynamoQueueDirectory implements QueueDirectory {
  private readonly opts: DynamoQueueDirectoryOptions;
  private readonly urls = new Map<string, string>();

  constructor(opts: DynamoQueueDirectoryOptions) {
    this.opts = opts;
  }

  async queue(queueUid: string): Promise<QueueTarget | undefined> {
    const r = await this.opts.getResource(queueUid);
    return r ? this.targetOf(r) : undefined;
  }

  /** The target of an already read Resource; undefined unless it is a live queue with an SQS queue. */
  async targetOf(r: ResourceRecord): Promise<QueueTarget | undefined> {
    if (r.form !== FORM_URLS.atLeastOnceQueue || r.deletedAt || r.phase === 'deleting') return undefined;
    let spec: ReturnType<typeof parseQueueSpec>;
    try {
      spec = parseQueueSpec(r.spec);
    } catch {
      return undefined;
    }
    const sqsUrl = await this.url(r.uid);
    if (!sqsUrl) return undefined;
    return {
      queueUid: r.uid,
      queueName: r.name,
      space: r.space,
      sqsUrl,
      defaultDelaySeconds: spec.deliveryDelaySeconds ?? 0,
      retentionSeconds: spec.messageRetentionSeconds,
    };
  }

  private async url(uid: string): Promise<string | undefined> {
    const cached = this.urls.get(uid);
    if (cached) return cached;
    const url = await this.opts.queueUrl(uid);
    if (url) {
      if (this.urls.size >= MAX_CACHED_URLS) this.urls.clear();
      this.urls.set(uid, url);
    }
    return url;
  }
}
