/**
 * Finds a fault seed whose schedule gives exactly the faults a test needs on its first SQS
 * request: the fault streams are seeded, so a seed found on a probe queue gives the same draws
 * on the test's own client for the same sequence of calls.
 */
import { CreateQueueCommand, SendMessageBatchCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import { sqsClient } from '../../lambdas/adapters/aws/clients.ts';
import type { FaultConfig } from '../../lambdas/local/faults/fault-config.ts';
import { type InjectedFault, onInjectedFault } from '../../lambdas/local/faults/fault-reports.ts';
import { withFaults } from '../../lambdas/local/faults/sdk-faults.ts';

/**
 * A config with `kind` at rate 0.5 on `operation` whose first call there meets exactly `kinds`
 * (the injected kinds of its tries, comma-joined, e.g. `lostAnswer`: the first answer lost, the
 * retry answered).
 */
export async function sqsFaultSeed(
  operation: 'SendMessage' | 'SendMessageBatch',
  kind: 'lostAnswer' | 'throttle',
  kinds: string,
): Promise<FaultConfig> {
  const scratch = sqsClient(inject('sqsEndpoint'));
  const { QueueUrl } = await scratch.send(
    new CreateQueueCommand({ QueueName: `probe-${operation}-${kind}-${Date.now()}` }),
  );
  scratch.destroy();
  const probe =
    operation === 'SendMessage'
      ? new SendMessageCommand({ QueueUrl, MessageBody: 'probe' })
      : new SendMessageBatchCommand({ QueueUrl, Entries: [{ Id: '0', MessageBody: 'probe' }] });
  for (let seed = 1; seed <= 60; seed++) {
    const config: FaultConfig = { seed, sqs: { operations: { [operation]: { [kind]: 0.5 } } } };
    const client = withFaults(sqsClient(inject('sqsEndpoint')), 'sqs', { config });
    const faults: InjectedFault[] = [];
    const off = onInjectedFault((f) => faults.push(f));
    try {
      await client.send(probe as SendMessageCommand);
      if (faults.map((f) => f.kind).join() === kinds) return config;
    } catch {
      // Every try faulted: not this seed.
    } finally {
      off();
      client.destroy();
    }
  }
  throw new Error(`no seed gives ${kinds} on ${operation}`);
}
