/**
 * The stand-ins every scenario shares: DynamoDB Local and the SQS stand-in, in memory, on
 * 127.0.0.1 and free ports, started once per bench process and stopped by their PIDs (also on
 * Ctrl-C and on a crash of the bench).
 */
import type { StandIn } from '../../lambdas/local/standins/child-process.ts';
import { startDynamoDbLocal } from '../../lambdas/local/standins/dynamodb-local.ts';
import { startSqsServer } from '../../lambdas/local/standins/sqs-server.ts';
import { measureStandIns } from './cpu.ts';

export interface Endpoints {
  dynamodb: string;
  sqs: string;
}

export interface StandIns {
  endpoints: Endpoints;
  pids: { dynamodb: number; sqs: number };
  stop(): Promise<void>;
}

export async function startStandIns(): Promise<StandIns> {
  const started: StandIn[] = [];
  const stopAll = async () => {
    await Promise.all(started.splice(0).map((s) => s.stop().catch(() => undefined)));
  };
  const onSignal = (signal: NodeJS.Signals) => {
    process.stderr.write(`\nbench: ${signal}; stopping the stand-ins\n`);
    void stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // A last resort if the process exits without stopping them: signal the PIDs we started.
  process.once('exit', () => {
    for (const s of started) {
      try {
        process.kill(s.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  try {
    const [ddbResult, sqsResult] = await Promise.allSettled([startDynamoDbLocal(), startSqsServer()]);
    for (const r of [ddbResult, sqsResult]) if (r.status === 'fulfilled') started.push(r.value);
    if (ddbResult.status === 'rejected') throw ddbResult.reason;
    if (sqsResult.status === 'rejected') throw sqsResult.reason;
    const [ddb, sqs] = [ddbResult.value, sqsResult.value];
    measureStandIns({ dynamodb: ddb.pid, sqs: sqs.pid });
    return {
      endpoints: { dynamodb: ddb.endpoint, sqs: sqs.endpoint },
      pids: { dynamodb: ddb.pid, sqs: sqs.pid },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
