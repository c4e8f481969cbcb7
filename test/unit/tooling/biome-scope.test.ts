/**
 * `workers/` holds users' own worker code (npm start's default --workers-dir): lint and format must
 * not judge it, or copying the README's worker there would fail `npm test`.
 * The repository's biome.json is applied to a scratch folder with the same layout: a badly
 * formatted worker under `workers/` passes, the same file anywhere else is reported.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const repo = new URL('../../../', import.meta.url);
const biome = new URL('node_modules/.bin/biome', repo).pathname;
const BAD = 'export default {queue(batch){ for (const m of batch.messages) {m.ack()} },}\n';

describe('biome leaves workers/ alone', () => {
  const dir = mkdtempSync(join(tmpdir(), 'biome-scope-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a badly formatted worker in workers/ passes; the same file outside it is reported', () => {
    // The repository's file as it is (formatted as biome wants it), less its schema path.
    const config = readFileSync(new URL('biome.json', repo), 'utf8').replace(/^\s*"\$schema":[^\n]*\n/m, '');
    expect(config).toContain('"!workers"');
    writeFileSync(join(dir, 'biome.json'), config);
    mkdirSync(join(dir, 'workers', 'default'), { recursive: true });
    writeFileSync(join(dir, 'workers', 'default', 'sloppy.mjs'), BAD);

    const clean = spawnSync(biome, ['check', '.'], { cwd: dir, encoding: 'utf8' });
    expect(clean.status, clean.stdout + clean.stderr).toBe(0);

    mkdirSync(join(dir, 'lambdas'));
    writeFileSync(join(dir, 'lambdas', 'sloppy.mjs'), BAD);
    const dirty = spawnSync(biome, ['check', '.'], { cwd: dir, encoding: 'utf8' });
    expect(dirty.status).not.toBe(0);
    const report = dirty.stdout + dirty.stderr;
    expect(report).toContain('lambdas/sloppy.mjs');
    expect(report).not.toContain('workers/default/sloppy.mjs');
  });
});
