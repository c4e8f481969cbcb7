/**
 * What every scale case needs around a bench Host: the physics' refusals counted by the call that
 * met them, the Host's warnings, and timed supervisor rounds (the very function AWS runs every
 * minute) with the calls each made.
 */
import { type SupervisorDeps, superviseOnce } from '../../lambdas/composition/aws-supervisor.ts';
import { log, setLogSink } from '../../lambdas/shared/log.ts';
import { supervisorDeps } from '../scenarios/idle.ts';
import { type BenchHost, createBenchHost } from '../support/bench-host.ts';
import { supervisorLogBytes } from '../support/log-meter.ts';
import { attribute, currentContext, Meter, sumSdk } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { startCasePhysics } from './physics.ts';
import { scaledGroup } from './project.ts';

export { supervisorDeps };

/** Refusals the physics answers carry this mark in their message. */
const MARK = 'TAKOFORM_PHYSICS';

/** Counts the physics' refusals by `context DynamoDB:Operation` (the call that met them). */
export function countRefusals(bench: BenchHost): Record<string, number> {
  const counts: Record<string, number> = {};
  bench.dynamodb.middlewareStack.add(
    (next, context) => async (args) => {
      try {
        return await next(args);
      } catch (err) {
        if (String((err as Error).message ?? '').includes(MARK)) {
          const key = `${currentContext()} DynamoDB:${String(context.commandName ?? '').replace(/Command$/, '')}`;
          counts[key] = (counts[key] ?? 0) + 1;
        }
        throw err;
      }
    },
    { step: 'initialize', name: 'scaleBenchRefusals' },
  );
  return counts;
}

/**
 * Host warnings and errors by message (and the error's name), while the case runs: counted for
 * the report instead of printed, since a case under physics may log thousands.
 */
export function captureWarnings(): { counts: Record<string, number>; restore(): void } {
  const counts: Record<string, number> = {};
  const previous = setLogSink((level, message, fields) => {
    // Info lines (a retry, a dead-letter move) come by the thousand in a storm: not printed.
    if (level !== 'warn' && level !== 'error') return;
    const name = (fields.err as { name?: string } | undefined)?.name;
    const key = name ? `${message} (${name})` : message;
    counts[key] = (counts[key] ?? 0) + 1;
  });
  return { counts, restore: () => void setLogSink(previous) };
}

/** AWS calls the supervisor made so far (DynamoDB, SQS, CloudWatch). */
const supervisorCalls = (meter: Meter) =>
  Object.values(sumSdk(meter.snapshot(), (c) => c === 'supervisor').byOp).reduce((n, e) => n + e.calls, 0);

/** One supervisor round, timed, its calls counted, and counted as one invocation of the supervisor function. */
export async function timedRound(deps: SupervisorDeps, meter: Meter): Promise<{ ms: number; calls: number }> {
  const before = supervisorCalls(meter);
  const t0 = performance.now();
  // A round the physics refused still took its time; the refusal is counted among the warnings.
  const r = await attribute('supervisor', () => superviseOnce(deps), meter).catch((err: unknown) =>
    log.warn('scale bench: a supervisor round failed', { err }),
  );
  const ms = performance.now() - t0;
  meter.lambda('supervisor', ms);
  if (r) meter.logged('supervisor', supervisorLogBytes(r));
  return { ms, calls: supervisorCalls(meter) - before };
}

/**
 * A scale case's bench Host behind its own physics, with its meter, its warnings captured and its
 * refusals counted; `close` restores the log and stops both.
 */
export async function openScaleCase(endpoints: Endpoints, scale: { k: number; transactionMs: number }) {
  const phys = await startCasePhysics(endpoints, scale);
  const warnings = captureWarnings();
  const meter = new Meter();
  const bench = await createBenchHost(phys.endpoints, {
    meter,
    idleWaitSeconds: 1,
    concurrency: phys.concurrency,
    startBudget: phys.startBudget,
    shardsPerGroup: scaledGroup(scale.k),
  });
  const refusedCalls = countRefusals(bench);
  const close = async () => {
    warnings.restore();
    await bench
      .close()
      .catch((err: unknown) => log.warn('scale bench: closing a bench Host failed', { err }));
    await phys.stop();
  };
  return { phys, warnings, meter, bench, refusedCalls, close };
}
