/**
 * Why each missed target was missed, and what would close it — written from this run's numbers
 * only (calls per batch by part, items they named, times per batch), so that it cannot describe
 * code the run did not measure. Where a cause is not measured, only the number is stated.
 */
import { fmt, fmtSpread } from './format.ts';
import { dynamoParts, itemsPerBatch, type PartBreakdown } from './per-batch.ts';
import { PRICES } from './pricing.ts';
import type { CellCost, CellCounts, CpuPerBatch, Row, Summary } from './report.ts';
import { foldKinds, type SdkTally } from './support/meter.ts';

const READ_OPS = new Set(['GetItem', 'BatchGetItem', 'Query', 'Scan', 'TransactGetItems']);

const byKey = (s: Summary, key: string): Row | undefined => s.rows.find((r) => r.key === key);
const missed = (r: Row | undefined): r is Row => r?.verdict === 'missed';

/** Item kinds a part read or wrote per batch, summed over its DynamoDB operations. */
function kindsOf(b: PartBreakdown, part: string, reads: boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, e] of Object.entries(b.ops[part] ?? {})) {
    if (!key.startsWith('DynamoDB:')) continue;
    if (READ_OPS.has(key.slice('DynamoDB:'.length)) !== reads) continue;
    for (const [kind, n] of Object.entries(foldKinds(e.items))) out[kind] = (out[kind] ?? 0) + n;
  }
  return out;
}

const kindList = (kinds: Record<string, number>, batches: number) =>
  Object.entries(kinds)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${fmt(n / Math.max(1, batches), 2)}`)
    .join(', ');

/** "batch-host:register 7.00 (reads 6.00: ATTACH 1.00, …; writes 1.00: …); …" */
export function dynamoByPart(b: PartBreakdown, withKinds = true): string {
  return dynamoParts(b)
    .map((p) => {
      const r = withKinds ? kindList(kindsOf(b, p.part, true), b.batches) : '';
      const w = withKinds ? kindList(kindsOf(b, p.part, false), b.batches) : '';
      return `${p.part} ${fmt(p.reads + p.writes, 2)} (reads ${fmt(p.reads, 2)}${r ? `: ${r}` : ''}; writes ${fmt(p.writes, 2)}${w ? `: ${w}` : ''})`;
    })
    .join('; ');
}

/** Item kinds read in the batch's path that the same path also writes (reads a condition could replace). */
function readAndWritten(b: PartBreakdown): { kinds: string[]; readsPerBatch: number } {
  const read: Record<string, number> = {};
  const written = new Set<string>();
  for (const part of Object.keys(b.ops)) {
    for (const [k, n] of Object.entries(kindsOf(b, part, true))) read[k] = (read[k] ?? 0) + n;
    for (const k of Object.keys(kindsOf(b, part, false))) written.add(k);
  }
  const kinds = Object.keys(read)
    .filter((k) => written.has(k))
    .sort();
  const n = kinds.reduce((a, k) => a + (read[k] ?? 0), 0);
  return { kinds, readsPerBatch: n / Math.max(1, b.batches) };
}

/** Calls per batch by the part of the Host that made them, with request units and item kinds. */
export function partTable(b: PartBreakdown): string {
  const parts = Object.keys(b.ops).sort();
  if (parts.length === 0) return '_not measured_';
  const ops = [...new Set(parts.flatMap((r) => Object.keys(b.ops[r] ?? {})))].sort();
  const n = Math.max(1, b.batches);
  const cell = (e: SdkTally | undefined) => {
    if (!e) return '';
    const units = e.rru + e.wru + e.refusedWrites;
    const unitText =
      units > 0 ? ` (${fmt(units / n, 2)} ${e.wru + e.refusedWrites > 0 ? 'WRU' : 'RRU'})` : '';
    const items = itemsPerBatch(e, n);
    return `${fmt(e.calls / n, 2)}${unitText}${items ? ` — ${items}` : ''}`;
  };
  const lines = [`| Call | ${parts.join(' | ')} |`, `|---|${parts.map(() => '---').join('|')}|`];
  for (const op of ops) lines.push(`| ${op} | ${parts.map((p) => cell(b.ops[p]?.[op])).join(' | ')} |`);
  const states = Object.entries(b.transitions)
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([state, k]) => `${state} ${fmt(k / n, 2)}`)
    .join(', ');
  const lambda = Object.entries(b.lambda)
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([role, k]) => `${role} ${fmt(k / n, 2)}`)
    .join(', ');
  lines.push(
    '',
    `Per batch — state transitions: ${states || 'none'}; Lambda invocations: ${lambda || 'none'}.`,
  );
  return lines.join('\n');
}

/** The cell whose breakdown the explanations quote: a steady stream if measured, else a drain. */
export function referenceCells(s: Summary): CellCounts[] {
  const steady = s.cells.find((c) => c.kind === 'steady' && c.batchSize === 10);
  const drain =
    s.cells.find((c) => c.kind === 'drain' && c.batchSize === 100 && c.concurrency === 10) ??
    s.cells.find((c) => c.kind === 'drain');
  return [drain, steady].filter((c): c is CellCounts => c !== undefined);
}

function throughputMiss(s: Summary, r: Row, c: CellCounts | undefined): string {
  const target = Number(r.target?.match(/[\d.]+$/)?.[0]);
  const runs = s.throughputRatios[c?.id ?? ''] ?? [];
  const parts = [
    `**Throughput ratio (${r.setting.replace(/, \d+ msgs$/, '')}): ${fmtSpread(r.ratio, 2)} against ${r.target?.replace('Host ÷ baseline ', '')} — missed** (below it in ${runs.filter((x) => x < target).length} of ${runs.length} runs).`,
  ];
  if (c && r.baseline) {
    // A lane's time per batch: concurrency × messages per batch ÷ messages per second.
    const hostMs = (c.concurrency * c.messagesPerBatch.median * 1000) / r.host.median;
    const baseMs = (c.concurrency * c.batchSize * 1000) / r.baseline.median;
    const pb = c.perBatch;
    const baseSqs = Number.isFinite(c.baselineSqsPerBatch.median)
      ? `, making ${fmtSpread(c.baselineSqsPerBatch, 1)} SQS requests and nothing else`
      : '';
    parts.push(
      `Each lane spent ${fmt(hostMs, 1)} ms per batch of ${fmt(c.messagesPerBatch.median, 1)} messages; the raw loop ${fmt(baseMs, 1)} ms per batch of ${c.batchSize}${baseSqs}.`,
      `Per batch the Host made ${fmtSpread(pb.sqsRequests, 1)} SQS requests, ${fmtSpread(pb.dynamoRequests, 1)} DynamoDB requests, ${fmtSpread(pb.lambda, 2)} Lambda invocations and ${fmtSpread(pb.transitions, 2)} state transitions; the DynamoDB requests by part: ${dynamoByPart(c.breakdown)}.`,
      `What would close it: a lane needs ≤ ${fmt(baseMs / target, 1)} ms per batch (${fmt(Math.max(0, hostMs - baseMs / target), 1)} ms less than now), by fewer or cheaper Host calls per batch (a lane already receives its next batch while the handler runs, which saves the receive round trips, not the Host's work).`,
    );
    if (c.cpu) parts.push(cpuSentence(c.cpu, target));
  }
  return parts.join(' ');
}

/**
 * Where a drain's time went in CPU: when the cores are busy, time per batch is CPU per batch,
 * and only less CPU per batch (fewer or cheaper requests) closes the gap, not more overlap.
 */
export function cpuSentence(cpu: CpuPerBatch, target?: number): string {
  const base = Number.isFinite(cpu.baseline.median)
    ? `; the raw loop ${fmtSpread(cpu.baseline, 1)} ms per batch with ${fmtSpread(cpu.baselineCores, 2)} cores busy (one Node thread and the SQS stand-in)`
    : '';
  // Throughput is cores busy ÷ CPU per batch on each side, so the ratio is reached at this
  // Host's cores busy with CPU per batch ≤ raw loop's × (Host cores ÷ raw cores) ÷ target.
  const limit = (cpu.baseline.median * cpu.cores.median) / (cpu.baselineCores.median * (target ?? 1));
  const need =
    target && Number.isFinite(limit)
      ? ` With the cores busy now, the ratio reaches ${target} at ≤ ${fmt(limit, 1)} ms of CPU per batch in all processes, ${fmt(Math.max(0, cpu.all.median - limit), 1)} ms less than now.`
      : '';
  return (
    `CPU per batch: ${fmtSpread(cpu.all, 1)} ms in all (the Host process ${fmtSpread(cpu.host, 1)}, DynamoDB Local ${fmtSpread(cpu.dynamodb, 1)}, the SQS stand-in ${fmtSpread(cpu.sqs, 1)}) with ${fmtSpread(cpu.cores, 2)} cores busy${base}.` +
    need
  );
}

function utilisationMiss(s: Summary, r: Row): string {
  const d = s.utilisationDetail;
  const slots = byKey(s, 'utilisation:slots');
  const out = [
    `**Running handlers: ${fmtSpread(r.host, 2)} of maxConcurrency against ≥ 0.9 — missed** (slots held: ${fmtSpread(slots?.host, 2)}).`,
  ];
  if (d) {
    const h = d.meanHandlerMs.median;
    const held = d.meanSlotMs.median;
    out.push(
      `A slot was held ${fmt(held, 0)} ms per batch, of which the handler ran ${fmt(h, 0)} ms (peak ${d.peakHandlers} handlers of ${d.maxConcurrency}, so the bound held). ` +
        `Handlers fill slots held × handler ÷ held = ${fmt((slots?.host.median ?? 1) * (h / Math.max(1, held)), 2)} of maxConcurrency.`,
      `What would close it: with every slot held, ≥ 0.9 needs ≤ ${fmt(h / 9, 1)} ms per batch outside the handler (now ${fmt(held - h, 0)} ms). The next batch is already received while the handler runs; registering it too would need a second slot per lane, which the bound forbids when every slot is held, so the time left outside the handler is the Host's registration and finalisation.`,
    );
    if (d.cpu) {
      const perSecond = (d.maxConcurrency * 0.9 * 1000) / Math.max(1, h);
      out.push(
        cpuSentence(d.cpu),
        `At ≥ 0.9 the handlers would start ${fmt(perSecond, 0)} batches a second, which at this CPU per batch needs ${fmt((perSecond * d.cpu.all.median) / 1000, 2)} cores busy (now ${fmtSpread(d.cpu.cores, 2)}).`,
      );
    }
  }
  return out.join(' ');
}

function dynamoMisses(s: Summary, rows: Row[]): string {
  const list = rows.map((r) => {
    const c = s.cells.find((x) => r.key === `dynamo:${x.kind}:${x.id}`);
    return `${c?.label ?? r.setting}: ${fmtSpread(r.host, 1)}`;
  });
  const out = [
    `**DynamoDB requests per batch: missed in ${rows.length} of ${s.cells.length} cells** against ≤ 6 (${list.join('; ')}).`,
  ];
  // The cells that missed, broken down; with none (an old result), the reference cells.
  const missed = rows
    .map((r) => s.cells.find((x) => r.key === `dynamo:${x.kind}:${x.id}`))
    .filter((c): c is CellCounts => c !== undefined);
  for (const c of missed.length > 0 ? missed : referenceCells(s)) {
    const b = c.breakdown;
    const both = readAndWritten(b);
    const reads: Record<string, number> = {};
    for (const part of Object.keys(b.ops))
      for (const [k, n] of Object.entries(kindsOf(b, part, true))) reads[k] = (reads[k] ?? 0) + n;
    const repeated = Object.entries(reads)
      .filter(([, n]) => n / Math.max(1, b.batches) > 1.05)
      .sort(([x], [y]) => x.localeCompare(y))
      .map(([k, n]) => `${k} ${fmt(n / Math.max(1, b.batches), 2)}`);
    out.push(
      `At ${c.label} (${fmt(b.batches, 0)} batches): ${dynamoByPart(b)}.` +
        (repeated.length > 0 ? ` Item kinds read more than once per batch: ${repeated.join(', ')}.` : '') +
        ((reads['DISPATCH/shard'] ?? 0) > 0
          ? " (DISPATCH/shard: the slot map's other shards, read as items of the registration's one BatchGetItem, which a take that saw one shard needs; they add read units, not requests.)"
          : '') +
        (both.kinds.length > 0
          ? ` ${fmt(both.readsPerBatch, 2)} reads per batch are of item kinds the same path also writes (${both.kinds.join(', ')}), which a condition on that write could check instead.`
          : '') +
        laneStarts(b),
    );
  }
  const manifest = rows
    .map((r) => s.cells.find((x) => r.key === `dynamo:${x.kind}:${x.id}`))
    .filter((c): c is CellCounts => c !== undefined && manifestWruPerBatch(c.breakdown) > 0);
  out.push(
    'What would close it: removing the requests beyond 6 per batch from the parts above, starting with the repeated reads.' +
      (manifest.length > 0
        ? ` One request per batch is the manifest's own PutItem, written just before the registration's transaction; folded back into the transaction it would cost ${manifest.map((c) => `${fmt(manifestWruPerBatch(c.breakdown), 1)} WRU more per batch at ${c.label}`).join(', ')}, since a transactional write is billed twice and on-demand DynamoDB bills request units, not requests.`
        : ''),
  );
  return out.join(' ');
}

/**
 * What lane starts (the AcquireSlot step) cost a cell, when they make more than half a request
 * per batch: mostly lanes started for a backlog that find the bound reached.
 */
function laneStarts(b: PartBreakdown): string {
  const ops = b.ops['step:AcquireSlot'] ?? {};
  let requests = 0;
  let refused = 0;
  for (const [key, e] of Object.entries(ops)) {
    if (!key.startsWith('DynamoDB:')) continue;
    requests += e.calls;
    refused += e.refusedWrites;
  }
  const n = Math.max(1, b.batches);
  const starts = b.lambda['step:AcquireSlot'] ?? 0;
  if (requests / n <= 0.5) return '';
  return (
    ` Lane starts (step:AcquireSlot, ${fmt(starts / n, 2)} per batch) made ${fmt(requests / n, 2)} requests per batch, ${fmt(refused / n, 2)} of them writes refused by a full shard or a full slot map:` +
    ' lanes started by full batches while the bound was all but reached (the doubling of lanes for a backlog; the lanes of a supervisor round start none from their first batch), each paying its take (and, once refused, a read of every shard); starting such lanes only in proportion to the free slots the registration read would close this part.'
  );
}

/** WRU per batch of the writes that name the batch manifest alone (its own PutItem). */
export function manifestWruPerBatch(b: PartBreakdown): number {
  let units = 0;
  for (const ops of Object.values(b.ops))
    for (const [key, e] of Object.entries(ops)) {
      if (!key.startsWith('DynamoDB:') || READ_OPS.has(key.slice(9))) continue;
      const kinds = Object.keys(foldKinds(e.items ?? {}));
      if (kinds.length === 1 && kinds[0] === 'BATCH/manifest') units += e.wru;
    }
  return units / Math.max(1, b.batches);
}

/**
 * What one cost cell would cost without the two parts that are design choices rather than
 * per-message floors, and the write budget its target leaves — all from this run's counts.
 */
export interface CostCloser {
  /** The manifest's write (every receipt handle), USD per million messages. */
  handlesUsd: number;
  stepFunctionsUsd: number;
  /** The cell's total without both. */
  withoutBoth: number;
  /**
   * What no design that records every receipt handle before its handler runs can go below: SQS's
   * send, receive and delete of every message (one request per 10 each), the manifest as measured
   * and the producer's writes — before any Lambda, Step Functions or other write.
   */
  floorUsd: number;
  /** WRU per batch the target leaves for the Host's writes, with lanes that run on and every other part as measured (may be < 0). */
  wruBudgetPerBatch: number;
  /** WRU per batch measured, the manifest's included. */
  wruPerBatch: number;
  manifestWruPerBatch: number;
  /** Lane executions started (AcquireSlot), batches and transitions per lane. */
  lanes: number;
  batchesPerLane: number;
  transitionsPerLane: number;
}

/** SendMessageBatch, ReceiveMessage and DeleteMessageBatch carry at most 10 messages each. */
const SQS_FLOOR_REQUESTS_PER_MESSAGE = 0.3;

export function costCloser(
  breakdown: CellCost['breakdown'],
  counts: CellCounts,
  limit: number,
  producerWruPer100: number,
  tailTransitionsPerLane = 0,
): CostCloser {
  const msgs = Math.max(1e-9, counts.messagesPerBatch.median);
  const manifestWru = manifestWruPerBatch(counts.breakdown);
  const handlesUsd = (manifestWru / msgs) * PRICES.dynamoWritePerMillionWru;
  const producerUsd = (producerWruPer100 / 100) * PRICES.dynamoWritePerMillionWru;
  // Lanes that run on cost next to no transitions per batch; the rest stays as measured.
  const othersUsd = breakdown.total - breakdown.dynamoWrites - breakdown.stepFunctions + producerUsd;
  const lanes = counts.breakdown.lambda['step:AcquireSlot'] ?? 0;
  const batchesPerLane = counts.breakdown.batches / Math.max(1, lanes);
  return {
    handlesUsd,
    stepFunctionsUsd: breakdown.stepFunctions,
    withoutBoth: breakdown.total - handlesUsd - breakdown.stepFunctions,
    floorUsd: SQS_FLOOR_REQUESTS_PER_MESSAGE * PRICES.sqsPerMillionRequests + handlesUsd + producerUsd,
    wruBudgetPerBatch: ((limit - othersUsd) / PRICES.dynamoWritePerMillionWru) * msgs,
    wruPerBatch: counts.perBatch.wru.median,
    manifestWruPerBatch: manifestWru,
    lanes,
    batchesPerLane,
    // The drain's window and the lanes' ends after it.
    transitionsPerLane: counts.perBatch.transitions.median * batchesPerLane + tailTransitionsPerLane,
  };
}

function costMisses(s: Summary, rows: Row[]): string {
  const out = [
    `**Cost: missed in ${rows.length} of ${s.costs.length} cells** (Cloudflare Queues: $${fmt(1.2, 2)} per million).`,
  ];
  const producerWru = Object.values(s.producerPer100).reduce((a, p) => a + p.wru, 0);
  const closers: string[] = [];
  for (const r of rows) {
    const c = s.costs.find((x) => x.cell === r.setting);
    const counts = s.cells.find((x) => x.kind === 'drain' && x.label.endsWith(r.setting));
    if (!c) continue;
    const limit = Number(r.target?.replace('≤ $', ''));
    const b = c.breakdown;
    const parts = (
      [
        [
          'DynamoDB writes',
          b.dynamoWrites,
          counts
            ? `${fmt(counts.perBatch.wru.median, 1)} WRU/batch, ${fmt(manifestWruPerBatch(counts.breakdown), 1)} of them the manifest`
            : '',
        ],
        ['DynamoDB reads', b.dynamoReads, counts ? `${fmt(counts.perBatch.rru.median, 1)} RRU/batch` : ''],
        [
          'Step Functions',
          b.stepFunctions,
          counts ? `${fmt(counts.perBatch.transitions.median, 2)} transitions/batch` : '',
        ],
        ['SQS', b.sqs, `${fmtSpread(c.sqsPerMessage, 2)} requests/message`],
        [
          'Lambda',
          b.lambdaRequests + b.lambdaDuration,
          counts ? `${fmt(counts.perBatch.lambda.median, 2)} invocations/batch` : '',
        ],
      ] as const
    )
      .filter(([, usd]) => usd > 0)
      .sort((x, y) => y[1] - x[1]);
    out.push(
      `${r.setting}: $${fmt(b.total, 3)} against ≤ $${fmt(limit, 2)}, $${fmt(b.total - limit, 3)} over — ${parts.map(([name, usd, per]) => `${name} $${fmt(usd, 3)}${per ? ` (${per})` : ''}`).join(', ')}.`,
    );
    if (!counts) continue;
    const k = costCloser(b, counts, limit, producerWru, c.tailPerLane.transitions);
    const verdict =
      k.withoutBoth <= limit ? 'under the target' : `still $${fmt(k.withoutBoth - limit, 3)} over`;
    closers.push(
      `${r.setting}: without the manifest's write ($${fmt(k.handlesUsd, 3)}, nearly all receipt handles) and with lanes that run on ($${fmt(k.stepFunctionsUsd, 3)} now: ${fmt(k.lanes, 0)} lanes ran ${fmt(k.batchesPerLane, 1)} batches and ${fmt(k.transitionsPerLane, 1)} transitions each, ${fmt(c.tailPerLane.transitions, 1)} of them after the last message${c.tailPerLane.rounds >= 0.05 ? `, in ${fmt(c.tailPerLane.rounds, 1)} more rounds per lane` : ''}), $${fmt(k.withoutBoth, 3)}, ${verdict}` +
        (k.withoutBoth > limit
          ? `; with lanes that run on and every other part as measured, the target leaves ${k.wruBudgetPerBatch > 0 ? `${fmt(k.wruBudgetPerBatch, 1)} WRU per batch for the Host's writes` : 'no room for any write'} (now ${fmt(k.wruPerBatch, 1)}, ${fmt(k.wruPerBatch - k.manifestWruPerBatch, 1)} without the manifest)`
          : '') +
        '.' +
        (k.floorUsd > limit
          ? ` While every receipt handle is recorded before its handler runs (the recovery below), this target is out of reach: SQS's send, receive and delete of each message (${SQS_FLOOR_REQUESTS_PER_MESSAGE} requests per message) and the manifest come to $${fmt(k.floorUsd, 3)} with the producer's writes, before any Lambda or other write.`
          : ''),
    );
  }
  if (closers.length > 0) {
    const steady = s.cells
      .filter((x) => x.kind === 'steady')
      .map((x) => `${x.label}: ${fmtSpread(x.perBatch.transitions, 2)} transitions per batch`)
      .join('; ');
    const rounds = rows
      .map((r) => s.costs.find((x) => x.cell === r.setting))
      .filter((c): c is CellCost => c !== undefined && c.tailPerLane.rounds >= 0.05);
    out.push(
      `What would close it, cell by cell, from the counts above: ${closers.join(' ')}`,
      ...(rounds.length > 0
        ? [
            `Rounds after the last message (${rounds.map((c) => `${c.cell}: ${fmt(c.tailPerLane.rounds, 1)} per lane`).join('; ')}): a lane whose queue is empty ends unless a send through the Host came after its slot was taken; a slot in a shard of the slot map other than the first does not see the wake count, so its release compares the last wake's time with its take's, allowing 5 s of clock skew between functions (\`SKEW_ALLOWANCE_MS\`). After a burst whose last send was that recent, every such lane takes another slot and runs another worker invocation with its idle wait, and its next release is woken by the same send again while the 5 s last (several times at the bench's 1 s idle wait; at AWS's default of 20 s a round's own wait outlasts the 5 s). What would close it: compare wake counts for those slots too — the release already reads the first shard, which holds the count — so that a woken lane is woken by a newer send only.`,
          ]
        : []),
      `The two parts, and why they stay: the manifest keeps every receipt handle (SQS's are about 390 characters, ≈ 0.33 KB per message as the Host stores them) so that recovery returns a lost runner's messages at once — RC-01's 30 s after a \`kill -9\` — instead of after their hold (the handler's deadline plus grace: more than 5 minutes with a worker's default timeout). Writing the handles only for batches that outlive their gathering visibility would need a timer in the runner that extends the messages' visibility while the handler runs; on Lambda it shares the event loop with the user's handler (a worker thread would not), and any extension that comes late — a handler that blocks the loop, a starved thread, SQS away for seconds — lets the messages return to another batch while the handler still runs, delivered again with the same attempt count. Today that happens only when SQS refuses the one extension at registration, so it is not built. Step Functions is paid per lane: these consumers' batches fit an Express execution's five minutes (a worker bound of 30 s), so their lanes run on the Express dispatcher, billed per execution and per 100 ms of its duration (64 MB) — the duration of a lane is its worker invocation's, which Lambda bills too — instead of per state transition at a Standard lane's start and end; in these one-burst drains each lane runs few batches, while the steady streams' lanes run on (${steady}). The other writes are per batch, whatever its size: the head (first settlement wins, settlements that outlive a restart), the slot's mark (DL-02's bound and recovery), the close and the hand-over — which is why batch 10 costs several times batch 100 per message, and why the batch-10 targets need a design with fewer records per batch, not a cheaper one of these. The two candidates known, neither built: the attachment's \`ConditionCheck\` leaves the registration's transaction once a stop or update fences every slot-map shard (2 WRU less), and the hand-over folds into the next registration's write of the slot (1 WRU, one DynamoDB request and one batch-host invocation less) — 10 WRU per batch of 10 together, still above what the batch-10 targets leave.`,
    );
  }
  return out.join(' ');
}

export function explanations(s: Summary): string[] {
  const out: string[] = [];
  for (const r of s.rows.filter((x) => x.key?.startsWith('throughput:') && missed(x))) {
    out.push(
      throughputMiss(
        s,
        r,
        s.cells.find((c) => c.kind === 'drain' && `throughput:${c.id}` === r.key),
      ),
    );
  }
  const handlers = byKey(s, 'utilisation:handlers');
  if (missed(handlers)) out.push(utilisationMiss(s, handlers));
  const dynamo = s.rows.filter((x) => x.key?.startsWith('dynamo:') && missed(x));
  if (dynamo.length > 0) out.push(dynamoMisses(s, dynamo));
  const cost = s.rows.filter((x) => x.key?.startsWith('cost:') && missed(x));
  if (cost.length > 0) out.push(costMisses(s, cost));
  const idle = byKey(s, 'idle:one');
  if (missed(idle)) {
    const b = s.idle.breakdownOne;
    out.push(
      `**Idle cost: $${fmtSpread(idle.host, 3)} per month against ≤ $1 — missed.** By part per month: SQS $${fmt(b.sqs, 3)}, DynamoDB $${fmt(b.dynamoReads + b.dynamoWrites, 3)}, Lambda $${fmt(b.lambdaRequests + b.lambdaDuration, 3)}, CloudWatch $${fmt(b.cloudwatch, 3)} (calls per round in the idle section).`,
    );
  }
  for (const r of s.rows.filter((x) => x.key?.startsWith('arrival:') && missed(x))) {
    const p50 = byKey(s, r.key?.replace(/:p99$/, ':p50') ?? '');
    out.push(
      `**${r.figure} (${r.setting}): ${fmtSpread(r.host, 0)} ms against ${r.target} — missed**${p50 && p50 !== r ? ` (p50 ${fmtSpread(p50.host, 0)} ms)` : ''}.`,
    );
  }
  const ack = byKey(s, 'settle:acknowledge():p99');
  if (missed(ack)) {
    const calls = Object.entries(s.callsPerSettle)
      .sort()
      .map(([op, n]) => `${fmt(n, 2)} ${op}`)
      .join(', ');
    out.push(
      `**acknowledge() p99: ${fmtSpread(ack.host, 1)} ms, ${fmtSpread(ack.ratio, 2)}× the bare conditional write — missed.** The Host made ${calls || 'no counted calls'} per settlement call; one conditional write per call would match the baseline.`,
    );
  }
  return out;
}

/** Measured observations beside the targets (no verdicts). */
export function findings(s: Summary): string[] {
  const out: string[] = [];
  for (const c of s.cells.filter((x) => x.kind === 'steady')) {
    const tp = byKey(s, `steady:${c.id}:throughput`);
    const p99 = byKey(s, `steady:${c.id}:p99`);
    if (!tp || !p99 || c.rate === undefined) continue;
    // The raw loop under the same producer shows what the stand-ins let through.
    const behind = (tp.baseline?.median ?? c.rate) - tp.host.median;
    out.push(
      `**Steady stream, ${c.label}**: the Host handled ${fmtSpread(tp.host, 0)} msg/s of the ${fmt(c.rate, 0)} sent, the raw loop ${fmtSpread(tp.baseline, 0)}; send → handler p99 ${fmtSpread(p99.host, 0)} ms against the raw loop's ${fmtSpread(p99.baseline, 0)} ms` +
        (behind > 0.05 * c.rate
          ? `; about ${fmt(behind, 0)} msg/s more than the Host handled queued up during the window, with ${fmtSpread(c.perBatch.dynamoRequests, 1)} DynamoDB requests per batch of ${fmtSpread(c.messagesPerBatch, 1)} messages.`
          : '.'),
    );
  }
  const b10 = s.cells.filter((c) => c.kind === 'drain' && c.batchSize === 10);
  const low = b10[0];
  const high = b10.at(-1);
  if (low && high && low !== high) {
    const perWrite = (c: CellCounts) => {
      let calls = 0;
      let units = 0;
      for (const ops of Object.values(c.breakdown.ops))
        for (const [key, e] of Object.entries(ops)) {
          if (!key.startsWith('DynamoDB:') || READ_OPS.has(key.slice(9))) continue;
          calls += e.calls;
          units += e.wru + e.refusedWrites;
        }
      return units / Math.max(1, calls);
    };
    out.push(
      `**Write size and concurrency**: at batch 10, a DynamoDB write request cost ${fmt(perWrite(low), 2)} WRU on average at concurrency ${low.concurrency} and ${fmt(perWrite(high), 2)} at concurrency ${high.concurrency}; WRU per batch ${fmtSpread(low.perBatch.wru, 2)} and ${fmtSpread(high.perBatch.wru, 2)}.`,
    );
  }
  const tail = s.costs.find((c) => c.batchSize === 100 && c.concurrency === 10)?.tailPerLane;
  const le = s.idle.laneEnd;
  if (tail || le) {
    out.push(
      '**How lanes end**: ' +
        (tail
          ? `after a batch 100 / concurrency 10 drain, per lane, ${fmt(tail.transitions, 1)} transitions, ${fmt(tail.lambda, 1)} Lambda invocations, ${fmt(tail.sqs, 1)} SQS requests and ${fmt(tail.dynamoCalls, 1)} DynamoDB requests were made after the last message was finalised. `
          : '') +
        (le
          ? `One lane started on an empty queue (idleWaitSeconds ${le.idleWaitSeconds}) made ${fmt(le.transitions, 1)} transitions, ${fmt(le.lambda, 1)} Lambda invocations (${fmt(le.gbSeconds, 2)} GB-s), ${fmt(le.sqs, 1)} SQS and ${fmt(le.dynamoCalls, 1)} DynamoDB requests: $${fmt(le.usd * 1e6, 0)} per million lane ends.`
          : ''),
    );
  }
  return out;
}
