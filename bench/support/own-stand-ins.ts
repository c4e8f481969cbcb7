/**
 * A scenario run on its own (`--scenario …`): the Step Functions hook installed, the stand-ins
 * started for it, and everything stopped after, the shared worker pool included, whatever the run
 * did.
 */
import { closeShared } from './bench-host.ts';
import { installStepFunctionsHook } from './sfn-hook.ts';
import { type Endpoints, type StandIns, startStandIns } from './standins.ts';

export async function withOwnStandIns<T>(
  log: (msg: string) => void,
  run: (endpoints: Endpoints) => Promise<T>,
): Promise<T> {
  installStepFunctionsHook();
  let standIns: StandIns | undefined;
  try {
    standIns = await startStandIns();
    log(`stand-ins up (DynamoDB Local pid ${standIns.pids.dynamodb}, SQS pid ${standIns.pids.sqs})`);
    return await run(standIns.endpoints);
  } finally {
    // A pool that fails to close must not cost the run's samples.
    await closeShared().catch(() => undefined);
    await standIns?.stop();
  }
}
