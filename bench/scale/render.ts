/**
 * The scale bench's Markdown: the targets with met or missed and why, each case's counts beside
 * their projection to AWS, and the projection's method and what it leaves out. Pure.
 */

import { SUPERVISE_PARALLEL } from '../../lambdas/delivery/supervision.ts';
import { AWS_LIMITS, physicsOf } from '../../lambdas/local/physics/physics-config.ts';
import { fmt } from '../format.ts';
import type { BenchMeta } from '../results-model.ts';
import type { CaseSample, ScaleSamples } from './model.ts';
import { AWS_CALL_MS, caseFigures, idleUsdPerConsumer, scaledGroup, stormLost } from './project.ts';
import { scaleTargetRows } from './targets.ts';

const cell = (s: string) => s.replace(/\|/g, '\\|');

function settingLines(s: ScaleSamples): string[] {
  const k = s.config.k;
  const p = physicsOf({ scale: k, transactionMs: s.config.transactionMs });
  const reserved = Object.entries(p.lambda.reserved)
    .map(([fn, n]) => `${fn} ${n}`)
    .join(', ');
  return [
    `Every case ran with the stand-ins' throughput physics on at **k = ${k}**: a DynamoDB partition key serves ` +
      `${fmt(p.writeUnitsPerSecond, 0)} WCU or ${fmt(p.readUnitsPerSecond, 0)} RCU a second ` +
      `(AWS: ${fmt(AWS_LIMITS.partitionWriteUnits, 0)} and ${fmt(AWS_LIMITS.partitionReadUnits, 0)}), ` +
      `a transaction holds its items ${p.holdMs} ms (${s.config.transactionMs} ms on AWS, × k, so that at 1/k ` +
      "of the load a conflict is as likely as on AWS), transactional writes are billed twice, and Lambda's " +
      `account pool is ${p.lambda.accountConcurrency} (AWS: ${fmt(AWS_LIMITS.accountConcurrency, 0)}) with the ` +
      `Host's reservations scaled (${reserved}). A consumer's maxConcurrency of 250 on AWS runs as ` +
      `${Math.round(250 / k)} local lanes, its share of the scaled pool: 250 lanes against a pool of ` +
      `${p.lambda.accountConcurrency} would measure throttling AWS would not see. For the same reason a ` +
      `consumer's slot items go ${scaledGroup(k)} to a partition key, not 25: its 25 local lanes spread over ` +
      'as many keys as its 250 lanes on AWS. Every item of one partition ' +
      'key shares one budget (as before DynamoDB splits a hot key range for heat; an item never splits, so ' +
      'per item the share is at most the one shown).',
  ];
}

function targetLines(s: ScaleSamples): string[] {
  const rows = scaleTargetRows(s);
  const met = rows.filter((r) => r.verdict === 'met').length;
  const judged = rows.filter((r) => r.verdict !== '—').length;
  const lines = [
    `**Scale targets met: ${met} of ${judged}** (projected to AWS; reported, not asserted).`,
    '',
    '| Figure | Target | Projected to AWS | Met? |',
    '|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${cell(r.figure)} | ${cell(r.target)} | ${cell(r.value)} | ${r.verdict === 'missed' ? '**missed**' : r.verdict} |`,
    ),
  ];
  const misses = rows.filter((r) => r.verdict === 'missed');
  if (misses.length > 0) {
    lines.push('', '### Why each scale target was missed', '');
    // A case's counts explain each of its misses: written once, then referred to.
    const told = new Map<string, string>();
    for (const r of misses) {
      const first = told.get(r.why);
      lines.push(
        `- **${r.figure}** (${r.value}, target ${r.target}): ${first ? `the same counts as for ${first}` : r.why}.`,
      );
      if (!first) told.set(r.why, `“${r.figure}”`);
    }
  }
  return lines;
}

const share = (v: number | undefined) => `${fmt((v ?? Number.NaN) * 100, 0)} %`;

function caseRow(c: CaseSample, k: number): string {
  const f = caseFigures(c, k);
  const h = f.hottest;
  return (
    `| ${cell(c.label)}${c.ok ? '' : ' (did not finish)'} | ${c.localLanes} | ${fmt(c.delivered, 0)} / ${fmt(c.batches, 0)} ` +
    `| ${fmt(f.localPerSecond, 0)} → **${fmt(f.awsPerSecond, 0)}** | ${fmt(f.conflictsPer1000, 1)} ` +
    `| ${fmt(f.throttlesPer1000, 1)} | ${fmt(f.lambdaThrottlesPer1000, 1)} | \`${cell(h?.partition ?? '-')}\` ` +
    `| ${fmt(h?.localWcu ?? Number.NaN, 1)} → **${fmt(h?.awsWcu ?? Number.NaN, 0)}** ` +
    `| ${fmt(h?.localRcu ?? Number.NaN, 1)} → **${fmt(h?.awsRcu ?? Number.NaN, 0)}** | ${share(h?.share)} ` +
    `| ${fmt(f.roundMs, 0)} → ${fmt(f.awsRoundMs, 0)} |`
  );
}

function caseLines(s: ScaleSamples): string[] {
  const k = s.config.k;
  return [
    'Each figure as measured in the stand-ins → projected to AWS. Messages/s and units/s × k (a limit ' +
      'divided by k bounded them); conflicts, throttles and shares are ratios of counts, the same at any k; ' +
      `a round's AWS time is its calls × ${AWS_CALL_MS} ms ÷ the consumers it visits at once (at most ${SUPERVISE_PARALLEL}).`,
    '',
    '| Case | Local lanes | Delivered / batches | Messages/s (sustained) | Conflicts / 1,000 batches | DynamoDB throttles / 1,000 batches | Lambda throttles / 1,000 batches | Hottest partition | WCU/s | RCU/s | Share of its limit | Supervisor round, ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...s.cases.map((c) => caseRow(c, k)),
  ];
}

function detailLines(s: ScaleSamples): string[] {
  const lines: string[] = [];
  for (const c of s.cases) {
    if (c.storm) {
      const x = c.storm;
      lines.push(
        `- ${c.label}: ${fmt(c.messages, 0)} messages, ${fmt(x.deliveries, 0)} failed deliveries in ` +
          `${fmt(c.windowSeconds, 1)} s from the first to the last dead-lettered (${fmt((x.deliveries / c.windowSeconds) * k(s), 0)} ` +
          `a second on AWS over that window, ${fmt(caseFigures(c, k(s)).awsPerSecond, 0)} sustained); ` +
          `${x.deadLettered} dead-lettered, ${stormLost(c)} lost; ${x.failedFinalisations} finalisations failed; ` +
          `${x.lanesFailed} lanes failed, ${x.recoveries} worker invocations failed and were recovered (RecoverBatch); ` +
          `${x.lanesEnded ?? 'n/a'} lanes ended (LaneDone) before the last message was dead-lettered, ` +
          'each after an empty receive or a hand-over (not counted as early: the queue was empty to it).',
      );
    }
    if (c.many) {
      const m = c.many;
      lines.push(
        `- ${c.label}: set up in ${fmt(m.setupSeconds, 0)} s; idle rounds ${m.idleRoundMs.map((v) => fmt(v, 0)).join(', ')} ms ` +
          `(${m.idleRoundCalls.map((v) => fmt(v, 0)).join(', ')} AWS calls); idle cost $${fmt(idleUsdPerConsumer(c), 3)} per consumer-month; ` +
          `trickles: ${m.trickleDelivered} of ${m.trickleSent} sent delivered to ${m.trickles} consumers while the hot one drained.`,
      );
    }
    const conflicts = Object.entries(c.physics.conflictsByItem);
    if (conflicts.length > 0)
      lines.push(
        `- ${c.label}: conflicts by item: ${conflicts.map(([i, n]) => `\`${i}\` ${n}`).join(', ')}.`,
      );
    const refused = Object.entries(c.refusedCalls);
    if (refused.length > 0)
      lines.push(
        `- ${c.label}: refused calls by caller: ${refused.map(([i, n]) => `\`${i}\` ${n}`).join(', ')}.`,
      );
    const warnings = Object.entries(c.warnings);
    if (warnings.length > 0)
      lines.push(`- ${c.label}: Host warnings: ${warnings.map(([i, n]) => `"${i}" ×${n}`).join(', ')}.`);
  }
  return lines.length > 0 ? ['', '### Counts behind the cases', '', ...lines] : [];
}

const k = (s: ScaleSamples) => s.config.k;

/** What the projection does and does not capture. */
export const PROJECTION_NOTES = [
  '### How the figures are projected, and what that leaves out',
  '',
  "- **Messages/s × k.** Valid where a scaled limit (a partition's budget, a transaction's hold, the Lambda pool) " +
    "bounded the local rate. Where this machine's CPU bounded it instead (no throttles, hottest share well under " +
    '100 %), the projection is a lower bound: AWS runs each lane on its own resources.',
  '- **Units a second × k, shares and per-1,000 ratios as measured.** The stand-ins divide every budget by k and ' +
    'the load is about 1/k, so a share of the limit and a count per batch carry over unchanged.',
  `- **Round times: calls × ${AWS_CALL_MS} ms ÷ ${SUPERVISE_PARALLEL}.** A round is a chain of calls per consumer, ` +
    `${SUPERVISE_PARALLEL} consumers at a time, whose latency no limit divides; the figure assumes an AWS call ` +
    "takes about that long and leaves out the supervisor's own CPU (the local round, with the stand-ins on the " +
    'same two cores, is shown beside it). A round over fewer than 1,000 consumers is scaled linearly to 1,000.',
  "- **Not captured:** Step Functions' state-transition quota (StartExecution's is modelled: each case has its " +
    "own buckets, divided by k), SQS's in-flight limit and API latency, Lambda cold starts and burst scaling, DynamoDB's adaptive capacity (it would split a hot key range " +
    'after minutes, but never one item), network latency between the functions, the producer side (the backlog ' +
    "was sent before each window), and the Host's calls outside the measured window.",
];

export function scaleSection(s: ScaleSamples): string[] {
  const errors = s.errors.map((e) => `- ${e.scenario} failed: ${e.error}`);
  return [
    "## Scale: the stand-ins at AWS's limits ÷ k",
    '',
    ...settingLines(s),
    '',
    ...targetLines(s),
    '',
    '### Cases',
    '',
    ...caseLines(s),
    ...detailLines(s),
    ...(errors.length > 0 ? ['', '### Cases that failed', '', ...errors] : []),
    '',
    ...PROJECTION_NOTES,
  ];
}

/** `bench/results/<date>-scale.md`: the run, then the section. */
export function scaleDocument(meta: BenchMeta, s: ScaleSamples): string {
  const command = `npm run bench -- ${s.config.mode === 'quick' ? '--quick ' : ''}--scenario scale`;
  return [
    `# Scale benchmark — ${meta.date}`,
    '',
    `Measured by \`${command}\`${meta.commit ? ` at \`${meta.commit}\`` : ''} on ${meta.cpus} × ${meta.cpuModel}, ` +
      `${meta.platform}, Node ${meta.node}; wall time ${fmt(meta.wallSeconds, 0)} s; load average ` +
      `${meta.loadAverageAtStart.map((v) => v.toFixed(2)).join(' ')} at start (the machine is shared).`,
    '',
    ...scaleSection(s),
    '',
  ].join('\n');
}
