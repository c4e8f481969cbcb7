import type { ScheduleResult } from './run-schedule.ts';

/** Totals over a set of schedule results. */
export function totals(results: ScheduleResult[]) {
  const sum = (f: (r: ScheduleResult) => number) => results.reduce((s, r) => s + f(r), 0);
  const d = (f: (v: NonNullable<ScheduleResult['delivery']>) => number) =>
    sum((r) => (r.delivery ? f(r.delivery) : 0));
  return {
    schedules: results.length,
    passed: results.filter((r) => r.ok).length,
    hostKills: sum((r) => r.hostKills),
    crashPointKills: sum((r) => r.crashPointKills),
    crashPointsMissed: sum((r) => r.crashPointsMissed),
    hostRestarts: sum((r) => r.hostRestarts),
    standInKills: sum((r) => r.standInKills),
    standInRestarts: sum((r) => r.standInRestarts),
    sent: d((v) => v.sent),
    sendsFailed: sum((r) => r.sendsFailed),
    delivered: d((v) => v.delivered),
    deliveries: d((v) => v.deliveries),
    duplicates: d((v) => v.duplicates),
    acked: d((v) => v.acked),
    deadLettered: d((v) => v.deadLettered),
    deadLetterCopies: d((v) => v.deadLetterCopies),
    dropped: d((v) => v.dropped),
    exhaustedUnseen: d((v) => v.exhaustedUnseen),
    unconfirmedDelivered: d((v) => v.unconfirmedDelivered),
    unconfirmedDeadLettered: d((v) => v.unconfirmedDeadLettered),
    lost: d((v) => v.lost.length),
    flips: d((v) => v.flips.length),
    breaches: d((v) => v.breaches.length),
    excessDeliveries: d((v) => v.excessDeliveries),
    anomalies: d(
      (v) =>
        v.attemptAnomalies.length +
        v.refusedFirstSettlements.length +
        v.unknownSettlementAcked.length +
        v.wrongOutcome.length +
        v.conflicts.length +
        v.unexplainedDeadLetters.length +
        v.orphanBatches.length,
    ),
    unconverged: results.filter((r) => r.unconverged.length > 0).length,
    keptSlotWaits: results.filter((r) => (r.keptSlotWaits ?? []).length > 0).map((r) => r.seed),
    inFlightWaits: results.filter((r) => (r.inFlightWaits ?? []).length > 0).map((r) => r.seed),
    operations: sum((r) => r.operations),
    replays: sum((r) => r.replays),
    durationMs: sum((r) => r.durationMs),
  };
}

/** A compact description of a list of seeds: `1..50` or `3, 7, 9`. */
export function seedList(seeds: number[]): string {
  if (seeds.length === 0) return '-';
  const sorted = [...seeds].sort((a, b) => a - b);
  const ranges: string[] = [];
  let from = sorted[0] as number;
  let to = from;
  for (const s of sorted.slice(1)) {
    if (s === to + 1) to = s;
    else {
      ranges.push(from === to ? `${from}` : `${from}..${to}`);
      from = to = s;
    }
  }
  ranges.push(from === to ? `${from}` : `${from}..${to}`);
  return ranges.join(', ');
}

export function formatReport(
  results: ScheduleResult[],
  meta: { profile: string; wallMs: number; parallel: number; startedAt: Date },
): string {
  const t = totals(results);
  const failed = results.filter((r) => !r.ok).map((r) => r.seed);
  const row = (label: string, value: string | number, note = '') =>
    `  ${label.padEnd(26)}${String(value).padStart(8)}${note ? `  ${note}` : ''}`;
  const lines = [
    `Chaos report — ${meta.startedAt.toISOString()} — profile ${meta.profile}, ${meta.parallel} at a time`,
    row('schedules run', t.schedules, `${t.passed} passed, ${t.schedules - t.passed} failed`),
    row(
      'Host kills (SIGKILL)',
      t.hostKills,
      `${t.crashPointKills} at crash points, ${t.hostKills - t.crashPointKills} kill -9 by the runner` +
        (t.crashPointsMissed
          ? ` (${t.crashPointsMissed} crash points not reached: killed at the bound)`
          : ''),
    ),
    row('Host restarts', t.hostRestarts, 'same data folder'),
    row('stand-in kills', t.standInKills, `${t.standInRestarts} restarted by the Host on its own`),
    row(
      'messages sent',
      t.sent,
      `accepted by the Host (duplicate sends included); ${t.sendsFailed} send requests failed`,
    ),
    row('delivered', t.delivered, `${t.deliveries} handler deliveries in all`),
    row('duplicates', t.duplicates, 'allowed, counted: deliveries after one the handler acknowledged'),
    row('acknowledged', t.acked),
    row(
      'dead-lettered',
      t.deadLettered,
      `after exactly 1 + maxRetries deliveries; +${t.deadLetterCopies} extra copies`,
    ),
    row('dropped', t.dropped, 'exhausted with no dead-letter queue'),
    row(
      'last delivery never run',
      t.exhaustedUnseen,
      'of those: the last counted delivery was registered, then the Host died',
    ),
    row('unconfirmed sends delivered', t.unconfirmedDelivered, 'answer lost, message arrived anyway'),
    row(
      'unconfirmed sends dead-lettered',
      t.unconfirmedDeadLettered,
      'answer lost, message exhausted its deliveries anyway',
    ),
    row('lost', t.lost, 'must be 0'),
    row('flips', t.flips, 'must be 0'),
    row('concurrency breaches', t.breaches, 'must be 0 (counted across maxConcurrency updates)'),
    row(
      'beyond 1 + maxRetries',
      t.excessDeliveries,
      'deliveries the Host caused beyond DL-07 (an attempt repeated or above 1 + maxRetries): must be 0',
    ),
    row('other anomalies', t.anomalies, 'attempts, settlements, DL-08, outcomes, conflicts: must be 0'),
    row('unconverged', t.unconverged, 'must be 0'),
    row(
      'waited for a kept slot',
      t.keptSlotWaits.length,
      `schedules whose wait was extended to a kept slot's deadline (its handler may still run): ${t.keptSlotWaits.length > 0 ? seedList(t.keptSlotWaits) : 'none'}`,
    ),
    row(
      'waited for hidden messages',
      t.inFlightWaits.length,
      `schedules whose wait was extended for messages hidden in the main queue (a lost receive answer, a postponed dead-letter move): ${t.inFlightWaits.length > 0 ? seedList(t.inFlightWaits) : 'none'}`,
    ),
    row('operations', t.operations, `each request sent twice; ${t.replays} replays after restarts`),
    row('time', `${Math.round(meta.wallMs / 1000)} s`, `${Math.round(t.durationMs / 1000)} s of schedules`),
    `  seeds: ${seedList(results.map((r) => r.seed))}`,
    `  failed seeds: ${seedList(failed)}`,
    `  replay one: npm run test:chaos -- --seed S${meta.profile === 'full' ? '' : ` --profile ${meta.profile}`}`,
  ];
  return lines.join('\n');
}

export function formatResult(r: ScheduleResult): string {
  const v = r.delivery;
  const variant = `${r.variant === 'classic' ? '' : ` [${r.variant}]`}${r.physics ? ` [physics ÷${r.physics}]` : ''}`;
  const head = `seed ${String(r.seed).padStart(4)} ${r.ok ? 'ok  ' : 'FAIL'} ${(r.durationMs / 1000).toFixed(1).padStart(5)}s${variant}`;
  const figures = v
    ? `sent ${v.sent} acked ${v.acked} dlq ${v.deadLettered} dropped ${v.dropped} dup ${v.duplicates} lost ${v.lost.length} flips ${v.flips.length} breaches ${v.breaches.length} beyond ${v.excessDeliveries}`
    : 'no delivery verdict';
  const faults = `kills ${r.hostKills} (crash ${r.crashPointKills}) stand-ins ${r.standInKills}`;
  const lines = [`${head}  ${faults}  ${figures}`];
  for (const f of r.failures) lines.push(`     ✗ ${f}`);
  for (const n of r.notes) lines.push(`     · ${n}`);
  if (r.folder) lines.push(`     folder ${r.folder}`);
  return lines.join('\n');
}
