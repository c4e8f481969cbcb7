import { type LaneState, roundCounted } from '../../lambdas/delivery/control-loop.ts';

/**
 * What a stand-in AcquireSlot handler answers: `result` with the lane's next state, as the step
 * Lambda answers (`ControlLoop.step`), so that the definition's paths resolve.
 */
export function laneAnswer(payload: unknown, result: Record<string, unknown>) {
  const { lane } = payload as { lane: LaneState };
  return { ...result, lane: roundCounted(lane) };
}
