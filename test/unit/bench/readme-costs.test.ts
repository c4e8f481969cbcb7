/**
 * The cost table of docs/costs.md is generated from a bench run: the renderer turns a results
 * JSON into the marked region, and `npm run bench -- --from <json>` rewrites exactly that region.
 * The fixture is a trimmed copy of a real full run (bench/results/2026-12-01.json, raw
 * utilisation traces dropped); nothing here runs the bench or times anything.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { fmt } from '../../../bench/format.ts';
import { COSTS_END, COSTS_START, costsRegion, replaceCostsRegion } from '../../../bench/readme-costs.ts';
import { summarise } from '../../../bench/report.ts';
import type { BenchConfig, BenchMeta, BenchSamples } from '../../../bench/results-model.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const fixture = path.join(here, 'fixtures/results-2026-12-01.json');
const saved = JSON.parse(readFileSync(fixture, 'utf8')) as {
  meta: BenchMeta;
  config: BenchConfig;
  samples: BenchSamples;
};

const between = (text: string) =>
  text.slice(text.indexOf(COSTS_START) + COSTS_START.length, text.indexOf(COSTS_END)).trim();

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the cost table of docs/costs.md from the bench', () => {
  const summary = summarise(saved.config, saved.samples);
  const region = costsRegion(saved.meta, summary, 'bench/results/2026-12-01.md');

  it('has one row per measured cell, with the run’s per-batch counts and cost', () => {
    expect(summary.cells).toHaveLength(saved.config.cells.length);
    for (const c of summary.cells) {
      const row = region.split('\n').find((l) => l.startsWith(`| ${c.label} |`));
      expect(row, c.label).toBeDefined();
      expect(row).toContain(`$${fmt(c.perMillion.median, 3)}`);
      expect(row).toContain(`| ${fmt(c.perBatch.transitions.median, 2)} |`);
      expect(row).toContain(`${fmt(c.perBatch.dynamoRequests.median, 1)} (`);
    }
    // The run's figure for batch 10 / concurrency 1, against the bench's cost target: $1.22 as published
    // then, $1.34 since a burst is priced until its lanes have ended (their last idle wait and end),
    // $1.36 since the batch host's time is billed at its deployed 1,024 MB (the run counted no logs).
    expect(region).toMatch(/\| drain, batch 10 \/ concurrency 1 \|.*\$1\.35\d \(≤ \$0\.60 missed\) \|/);
    expect(region).toContain('[results](bench/results/2026-12-01.md)');
    expect(region).toContain(`$${fmt(summary.idle.hostWithOneIdleConsumer.median, 3)} per month`);
  });

  it('names the commit measured when the run recorded one (older runs did not)', () => {
    expect(region).toContain('Measured by `npm run bench` on ');
    const withCommit = costsRegion({ ...saved.meta, commit: '60bc04a' }, summary, 'r.md');
    expect(withCommit).toContain('Measured by `npm run bench` at `60bc04a` on ');
  });

  it('replaces only the marked region, and the same run renders the same text', () => {
    const page = `# T\n\nbefore\n${COSTS_START}\nold table\n${COSTS_END}\nafter\n`;
    const once = replaceCostsRegion(page, region);
    expect(between(once)).toBe(region);
    expect(once.startsWith('# T\n\nbefore\n')).toBe(true);
    expect(once.endsWith(`${COSTS_END}\nafter\n`)).toBe(true);
    expect(replaceCostsRegion(once, region)).toBe(once);
    expect(() => replaceCostsRegion('no markers', region)).toThrow(/exactly one/);
  });

  it('docs/costs.md carries exactly one region, and the README none', () => {
    const page = readFileSync(path.join(root, 'docs/costs.md'), 'utf8');
    expect(() => replaceCostsRegion(page, region)).not.toThrow();
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme).not.toContain(COSTS_START);
  });

  it('`npm run bench -- --from <json>` re-renders the region from the saved run', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'bench-from-'));
    dirs.push(dir);
    const json = path.join(dir, 'saved.json');
    copyFileSync(fixture, json);
    const pageFile = path.join(dir, 'costs.md');
    const outside = ['# Costs and limits\n\n', '\n\nIdle cost: hand-written.\n'];
    writeFileSync(pageFile, `${outside[0]}${COSTS_START}\nstale\n${COSTS_END}${outside[1]}`);
    const out = path.join(dir, 'results');
    await promisify(execFile)(
      process.execPath,
      [path.join(root, 'bench/run-bench.ts'), '--from', json, '--out', out, '--costs-page', pageFile],
      { cwd: root },
    );
    const rewritten = readFileSync(pageFile, 'utf8');
    expect(between(rewritten)).toBe(costsRegion(saved.meta, summary, 'results/2026-12-01.md'));
    expect(rewritten.startsWith(`${outside[0]}${COSTS_START}\n`)).toBe(true);
    expect(rewritten.endsWith(`${COSTS_END}${outside[1]}`)).toBe(true);
    expect(readFileSync(path.join(out, 'latest.md'), 'utf8')).toContain('## Per batch, every cell');
  });
});
