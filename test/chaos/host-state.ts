/**
 * The Host's own state, read directly from its stand-ins (DynamoDB Local and the SQS server,
 * found as the Host's descendants): batch heads and manifests, concurrency slots, SQS queues and
 * their message counts. Nothing here goes through the Host's code.
 */
import { DynamoDBClient, ScanCommand, type ScanCommandOutput } from '@aws-sdk/client-dynamodb';
import {
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { manifestOfItem } from '../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { consumerOfSlotKey } from '../../lambdas/adapters/aws/slot-groups.ts';
import type { HostController } from './host-control.ts';

export const LOCAL_TABLE = 'takoform-host';
const CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

/** A batch head as stored (`BATCH#<id>` / `head`). */
export interface HeadItem {
  batchId: string;
  consumerUid: string;
  queueUid: string;
  size: number;
  closed: boolean;
  outcome?: string;
  applied: boolean;
  settled: Record<string, string>;
  all?: string;
  doubtful: boolean;
  /** The consumer generation the batch was registered under (heads of older Hosts: none). */
  generation?: number;
  /** Which manifest item is the batch's (heads of older Hosts: none, the item `manifest`). */
  manifestRef?: string;
}

export interface ManifestItem {
  id: string;
  ts: number;
  attempts: number;
  hadRecord: boolean;
}

export interface BatchView {
  heads: Map<string, HeadItem>;
  manifests: Map<string, ManifestItem[]>;
  /** consumerUid → batch ids holding a slot. */
  slots: Map<string, string[]>;
  /** batch id → its slot's deadline (epoch ms): until when the Host may keep it. */
  deadlines?: Map<string, number>;
}

export interface QueueCounts {
  visible: number;
  inFlight: number;
  delayed: number;
}

export class HostState {
  private readonly ctl: HostController;
  private clients: { key: string; ddb: DynamoDBClient; sqs: SQSClient } | undefined;

  constructor(ctl: HostController) {
    this.ctl = ctl;
  }

  private async connect(): Promise<{ ddb: DynamoDBClient; sqs: SQSClient }> {
    const ep = await this.ctl.endpoints();
    const key = `${ep.dynamodb} ${ep.sqs}`;
    if (this.clients?.key !== key) {
      this.clients?.ddb.destroy();
      this.clients?.sqs.destroy();
      const common = { region: 'us-east-1', credentials: CREDENTIALS, maxAttempts: 2 };
      this.clients = {
        key,
        ddb: new DynamoDBClient({ ...common, endpoint: ep.dynamodb }),
        sqs: new SQSClient({ ...common, endpoint: ep.sqs, useQueueUrlAsEndpoint: false }),
      };
    }
    return this.clients;
  }

  close(): void {
    this.clients?.ddb.destroy();
    this.clients?.sqs.destroy();
    this.clients = undefined;
  }

  /** Every batch head, manifest and slot map in the table (consistent scan, paginated). */
  async batches(): Promise<BatchView> {
    const { ddb } = await this.connect();
    const deadlines = new Map<string, number>();
    const view: BatchView = { heads: new Map(), manifests: new Map(), slots: new Map(), deadlines };
    const manifests = new Map<string, ManifestItem[]>();
    let start: ScanCommandOutput['LastEvaluatedKey'];
    for (let page = 0; page < 1000; page++) {
      const out = await ddb.send(
        new ScanCommand({
          TableName: LOCAL_TABLE,
          ConsistentRead: true,
          FilterExpression: 'begins_with(pk, :b) OR begins_with(pk, :d)',
          ExpressionAttributeValues: { ':b': { S: 'BATCH#' }, ':d': { S: 'DISPATCH#' } },
          ExclusiveStartKey: start,
        }),
      );
      for (const raw of out.Items ?? []) {
        const item = unmarshall(raw);
        const pk = String(item.pk);
        if (pk.startsWith('DISPATCH#')) {
          // A consumer's slots may be spread over several shard items: all of them count.
          const consumer = consumerOfSlotKey(pk);
          view.slots.set(consumer, [...(view.slots.get(consumer) ?? []), ...Object.keys(item.slots ?? {})]);
          for (const [id, deadline] of Object.entries(item.slots ?? {})) deadlines.set(id, Number(deadline));
        } else if (item.sk === 'head') {
          view.heads.set(String(item.batchId), {
            batchId: String(item.batchId),
            consumerUid: String(item.consumerUid),
            queueUid: String(item.queueUid),
            size: Number(item.size),
            closed: item.closed === true,
            outcome: item.outcome as string | undefined,
            applied: item.applied === true,
            settled: (item.settled ?? {}) as Record<string, string>,
            all: item.all as string | undefined,
            doubtful: item.doubtful === true,
            ...(typeof item.generation === 'number' ? { generation: item.generation } : {}),
            ...(typeof item.manifestRef === 'string' ? { manifestRef: item.manifestRef } : {}),
          });
        } else if (String(item.sk).startsWith('manifest')) {
          // Delivered entries (`moves` were received, not delivered). A registration that failed
          // or was replayed may leave a manifest no head names: only the head's own counts.
          manifests.set(`${item.batchId}/${item.sk}`, manifestOfItem(item).entries as ManifestItem[]);
        }
      }
      start = out.LastEvaluatedKey;
      if (!start) break;
    }
    for (const [batchId, head] of view.heads) {
      const own = manifests.get(
        `${batchId}/${head.manifestRef ? `manifest#${head.manifestRef}` : 'manifest'}`,
      );
      if (own) view.manifests.set(batchId, own);
    }
    return view;
  }

  /** Names of the SQS queues the Host made (`takoform-…`). */
  async sqsQueueNames(): Promise<string[]> {
    const { sqs } = await this.connect();
    const names: string[] = [];
    let token: string | undefined;
    for (let page = 0; page < 100; page++) {
      const out = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: 'takoform-', NextToken: token }));
      for (const url of out.QueueUrls ?? []) names.push(url.slice(url.lastIndexOf('/') + 1));
      token = out.NextToken;
      if (!token) break;
    }
    return names;
  }

  /** SQS's counts of the queue of a queue Resource; undefined when the queue does not exist. */
  async counts(queueUid: string): Promise<QueueCounts | undefined> {
    const { sqs } = await this.connect();
    let url: string | undefined;
    try {
      url = (await sqs.send(new GetQueueUrlCommand({ QueueName: `takoform-${queueUid}` }))).QueueUrl;
    } catch {
      return undefined;
    }
    if (!url) return undefined;
    const out = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    const a = out.Attributes ?? {};
    return {
      visible: Number(a.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
    };
  }
}
