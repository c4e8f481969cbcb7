/**
 * The reasoning behind the cost misses that no single run's numbers show: why lanes go round
 * again after a burst, and why the manifest's write and the per-lane Step Functions cost stay.
 * Kept apart from the arithmetic so each sentence reads on its own.
 */
import { fmt } from '../format.ts';
import type { CellCost } from '../summary-model.ts';

/** Rounds lanes took after the last message, and the skew allowance that wakes them. */
export function roundsAfterLastMessage(cells: CellCost[]): string {
  const perCell = cells.map((c) => `${c.cell}: ${fmt(c.tailPerLane.rounds, 1)} per lane`).join('; ');
  return [
    `Rounds after the last message (${perCell}):` +
      ' a lane whose queue is empty ends unless a send through the Host came after its slot was taken;' +
      ' a slot in a shard of the slot map other than the first does not see the wake count,' +
      " so its release compares the last wake's time with its take's," +
      ' allowing 5 s of clock skew between functions (`SKEW_ALLOWANCE_MS`).',
    'After a burst whose last send was that recent, every such lane takes another slot' +
      ' and runs another worker invocation with its idle wait,' +
      ' and its next release is woken by the same send again while the 5 s last' +
      " (several times at the bench's 1 s idle wait; at AWS's default of 20 s a round's own wait outlasts the 5 s).",
    'What would close it: compare wake counts for those slots too' +
      ' — the release already reads the first shard, which holds the count —' +
      ' so that a woken lane is woken by a newer send only.',
  ].join(' ');
}

const MANIFEST_STAYS = [
  'The two parts, and why they stay: the manifest keeps every receipt handle' +
    " (SQS's are about 390 characters, ≈ 0.33 KB per message as the Host stores them)" +
    " so that recovery returns a lost runner's messages at once — RC-01's 30 s after a `kill -9` —" +
    " instead of after their hold (the handler's deadline plus grace: more than 5 minutes with a worker's default timeout).",
  'Writing the handles only for batches that outlive their gathering visibility would need a timer in the runner' +
    " that extends the messages' visibility while the handler runs;" +
    " on Lambda it shares the event loop with the user's handler (a worker thread would not)," +
    ' and any extension that comes late — a handler that blocks the loop, a starved thread, SQS away for seconds —' +
    ' lets the messages return to another batch while the handler still runs, delivered again with the same attempt count.',
  'Today that happens only when SQS refuses the one extension at registration, so it is not built.',
];

/** `steadyTransitions` names the steady streams' transitions per batch, whose lanes run on. */
const stepFunctionsPerLane = (steadyTransitions: string) =>
  "Step Functions is paid per lane: these consumers' batches fit an Express execution's five minutes" +
  ' (a worker bound of 30 s), so their lanes run on the Express dispatcher,' +
  ' billed per execution and per 100 ms of its duration (64 MB)' +
  " — the duration of a lane is its worker invocation's, which Lambda bills too —" +
  " instead of per state transition at a Standard lane's start and end;" +
  ' in these one-burst drains each lane runs few batches,' +
  ` while the steady streams' lanes run on (${steadyTransitions}).`;

const PER_BATCH_WRITES = [
  'The other writes are per batch, whatever its size:' +
    ' the head (first settlement wins, settlements that outlive a restart),' +
    " the slot's mark (DL-02's bound and recovery), the close and the hand-over" +
    ' — which is why batch 10 costs several times batch 100 per message,' +
    ' and why the batch-10 targets need a design with fewer records per batch, not a cheaper one of these.',
  "Registration's head and slot mark are two plain writes (2 WRU; one transaction billed them 4)." +
    " The candidate left: the hand-over folds into the next registration's write of the slot" +
    ' (1 WRU, one DynamoDB request and one batch-host invocation less)' +
    ' — still above what the batch-10 targets leave.',
];

/** Why the manifest's write and the per-lane Step Functions cost are kept, and what the other writes are for. */
export const whyTheTwoPartsStay = (steadyTransitions: string): string =>
  [...MANIFEST_STAYS, stepFunctionsPerLane(steadyTransitions), ...PER_BATCH_WRITES].join(' ');
