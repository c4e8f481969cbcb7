/**
 * `npm run docs:forms`: writes docs/forms/<kind>.md, the reference of every spec field, from the
 * zod schemas the Host validates with (test/unit/cli/field-reference.test.ts fails when they differ).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { markdown } from '../cli/field-reference.ts';
import { KIND_NAMES } from '../cli/kinds.ts';

const dir = fileURLToPath(new URL('../docs/forms/', import.meta.url));
mkdirSync(dir, { recursive: true });
for (const kind of KIND_NAMES) {
  writeFileSync(`${dir}${kind}.md`, markdown(kind));
  process.stdout.write(`wrote docs/forms/${kind}.md\n`);
}
