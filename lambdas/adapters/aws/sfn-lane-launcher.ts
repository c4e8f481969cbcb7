import { type SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import type { LaneLauncher } from '../../delivery/control-loop.ts';

/**
 * Lanes on AWS: one execution of a dispatcher state machine each — the Express one for lanes of
 * that kind when the Host has it (`lane-kinds.ts`), else the Standard one. A Standard name already
 * used is refused (`ExecutionAlreadyExists`) — or, for a running execution with the same input,
 * answered idempotently — which is what makes concurrent wakes start one lane there; Express
 * lanes rely on the wake's start lease alone (`ControlLoop.wake`), and the slot map bounds
 * whatever runs either way.
 */
export function sfnLaneLauncher(
  sfn: Pick<SFNClient, 'send'>,
  standardArn: string,
  expressArn?: string,
): LaneLauncher {
  return {
    async start(name, input, kind) {
      const stateMachineArn = kind === 'express' && expressArn ? expressArn : standardArn;
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
