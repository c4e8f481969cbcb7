import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * A file of this package's Lambda code, found beside the constructs: in a clone the TypeScript
 * source (`lib/constructs` → `lambdas/x.ts`), in the installed package the compiled JavaScript
 * (`dist/lib/constructs` → `dist/lambdas/x.js`). esbuild bundles either at synth, so the
 * consuming app needs neither this repository's tree nor Docker.
 */
export function lambdaEntry(relative: string): string {
  const source = lambdaPath(relative);
  if (existsSync(source)) return source;
  const compiled = source.replace(/\.ts$/, '.js');
  if (existsSync(compiled)) return compiled;
  throw new Error(`Lambda entry ${relative} is missing (looked for ${source} and ${compiled})`);
}

/** A folder of the Lambda code (files it reads at run time), in either layout. */
export function lambdaPath(relative: string): string {
  return fileURLToPath(new URL(`../../lambdas/${relative}`, import.meta.url));
}
