/**
 * `npm run test:chaos -- [--seeds N] [--first S] [--seed S]… [--profile full|short]
 *                        [--parallel P] [--report] [--keep] [--verbose] [--json FILE]`
 *
 * Runs seeded fault-injection schedules against the local Host (see schedule.ts) and prints one
 * line per schedule; `--report` adds the totals. Exits 1 if any schedule failed. A failing seed
 * is replayed with `--seed S` (and the same `--profile`).
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { formatReport, formatResult } from './report.ts';
import { runSchedule, type ScheduleResult } from './run-schedule.ts';
import { describeSchedule, type Profile, scheduleFor } from './schedule.ts';

const USAGE = `Usage: npm run test:chaos -- [options]
  --seeds N            run N schedules, seeds first..first+N-1 (default 50)
  --first S            the first seed (default 1)
  --seed S             run only seed S (repeatable)
  --profile P          full (default: per seed, shortened or default timings, with or without
                       AWS faults), short (the schedules npm test runs), or truth (only default
                       timings and/or AWS faults, TAKOFORM_FAULTS)
  --parallel P         schedules at once, each with its own Host (default 3)
  --report             print the totals after the per-seed lines
  --describe           print each schedule's steps before running it
  --keep               keep each schedule's folder (data, worker logs, Host log)
  --verbose            progress lines
  --json FILE          write every result as JSON`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seeds: { type: 'string' },
      first: { type: 'string' },
      seed: { type: 'string', multiple: true },
      profile: { type: 'string' },
      parallel: { type: 'string' },
      report: { type: 'boolean' },
      describe: { type: 'boolean' },
      keep: { type: 'boolean' },
      verbose: { type: 'boolean' },
      json: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const int = (raw: string | undefined, fallback: number, name: string) => {
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a non-negative integer`);
    return Number(raw);
  };
  const profile = (values.profile ?? 'full') as Profile;
  if (profile !== 'full' && profile !== 'short' && profile !== 'truth')
    throw new Error('--profile is full, short or truth');
  const seeds = values.seed?.length
    ? values.seed.map((s) => int(s, 0, '--seed'))
    : Array.from({ length: int(values.seeds, 50, '--seeds') }, (_, i) => int(values.first, 1, '--first') + i);
  const parallel = Math.max(1, int(values.parallel, 3, '--parallel'));

  const startedAt = new Date();
  const results: ScheduleResult[] = [];
  let next = 0;
  const lane = async () => {
    while (next < seeds.length) {
      const seed = seeds[next++] as number;
      const schedule = scheduleFor(seed, profile);
      if (values.describe) process.stdout.write(`${describeSchedule(schedule)}\n`);
      const r = await runSchedule(schedule, {
        keep: values.keep === true,
        log: values.verbose ? (line) => process.stderr.write(`${line}\n`) : undefined,
      });
      results.push(r);
      process.stdout.write(`${formatResult(r)}\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, seeds.length) }, lane));
  results.sort((a, b) => a.seed - b.seed);
  if (values.report) {
    process.stdout.write(
      `\n${formatReport(results, { profile, wallMs: Date.now() - startedAt.getTime(), parallel, startedAt })}\n`,
    );
  }
  if (values.json) writeFileSync(values.json, JSON.stringify(results, null, 2));
  return results.every((r) => r.ok) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  },
);
