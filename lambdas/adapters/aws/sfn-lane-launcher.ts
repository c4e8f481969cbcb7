import { type SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import type { LaneLauncher } from '../../delivery/control-loop.ts';

/**
 * Lanes on AWS: one Standard execution of the dispatcher state machine each. A name already used
 * is refused (`ExecutionAlreadyExists`) — or, for a running execution with the same input,
 * answered idempotently — which is what makes concurrent wakes start one lane.
 */
export function sfnLaneLauncher(sfn: Pick<SFNClient, 'send'>, stateMachineArn: string): LaneLauncher {
  return {
    async start(name, input) {
      try {
        await sfn.send(new StartExecutionCommand({ stateMachineArn, name, input: JSON.stringify(input) }));
        return 'started';
      } catch (err) {
        if ((err as { name?: string })?.name === 'ExecutionAlreadyExists') return 'exists';
        throw err;
      }
    },
  };
}
