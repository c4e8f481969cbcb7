/**
 * docs/api, the API reference of the package's constructs, is generated from their TSDoc
 * (`npm run docs:api`: API Extractor and API Documenter): it must be what the sources make now.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('the API reference (OPS-01)', () => {
  it('docs/api is what the constructs’ TSDoc generates now', () => {
    const run = spawnSync(process.execPath, ['scripts/api-docs.ts', '--check'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/^docs\/api is up to date \(\d+ pages\)$/m);
  });
});
