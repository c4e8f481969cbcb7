/**
 * Setup file of the integration project. In single-endpoint mode against moto
 * (`TAKOFORM_ENDPOINT_EMULATOR=moto`, set by `npm run test:moto`), skips the tests listed in
 * moto-known-gaps.json: each fails only because moto lacks what AWS does, and each reason is
 * proved by a direct SDK call in test/integration/single-endpoint/moto-gaps.test.ts. In every
 * other mode it does nothing.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeEach } from 'vitest';
import { z } from 'zod';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const KnownGaps = z.array(
  z.strictObject({
    /** Relative to the repository root. */
    file: z.string().startsWith('test/integration/'),
    /** The test's describe titles and its own, joined by ' > ' as vitest prints them. */
    test: z.string().min(1),
    reason: z.string().min(20),
    /** The title of the test in moto-gaps.test.ts that proves the reason. */
    proof: z.string().min(1),
  }),
);
export type KnownGap = z.infer<typeof KnownGaps>[number];

export function loadMotoKnownGaps(): KnownGap[] {
  return KnownGaps.parse(
    JSON.parse(readFileSync(path.join(root, 'test/support/moto-known-gaps.json'), 'utf8')),
  );
}

interface Named {
  name: string;
  suite?: Named;
  /** Set on the file's own suite only, whose name is the file path. */
  filepath?: string;
}
/** `describe > … > test`, without the file. */
export function titleOf(task: Named): string {
  const names: string[] = [];
  for (let t: Named | undefined = task; t && t.filepath === undefined; t = t.suite) names.unshift(t.name);
  return names.join(' > ');
}

if (process.env.TAKOFORM_ENDPOINT_EMULATOR === 'moto') {
  const gaps = loadMotoKnownGaps();
  beforeEach((ctx) => {
    const file = path.relative(root, ctx.task.file.filepath);
    const title = titleOf(ctx.task);
    const gap = gaps.find((g) => g.file === file && g.test === title);
    if (gap) ctx.skip(`moto gap: ${gap.reason}`);
  });
}
