/**
 * `npm run docs:api`: the API reference of the package's constructs (docs/api/), generated from
 * their TSDoc. The declarations are emitted into a scratch folder, API Extractor reads the
 * package's entry (lib/index.ts) from them into its doc model, and API Documenter writes one
 * Markdown page per exported item. `--check` writes nothing and exits 1 when docs/api differs
 * from what the sources make now (test/infra/api-docs.test.ts runs it).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig, ExtractorLogLevel } from '@microsoft/api-extractor';

const root = fileURLToPath(new URL('..', import.meta.url));
const docs = path.join(root, 'docs', 'api');
const check = process.argv.includes('--check');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);

/** Every file under `dir`, relative, with its text. */
function tree(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    out.set(path.relative(dir, file), readFileSync(file, 'utf8'));
  }
  return out;
}

const scratch = mkdtempSync(path.join(tmpdir(), 'takoform-api-'));
try {
  const dts = path.join(scratch, 'dts');
  execFileSync(
    process.execPath,
    [bin('tsc'), '-p', path.join(root, 'tsconfig.build.json'), '--emitDeclarationOnly', '--outDir', dts],
    { stdio: 'inherit' },
  );
  // The CDK's convention is `@default`; TSDoc's tag for it, which API Documenter prints, is
  // `@defaultValue`, and a brace in its text (`@default {}`) must be escaped there.
  for (const [file, text] of tree(dts)) {
    if (!file.endsWith('.d.ts') || !text.includes('@default ')) continue;
    const tsdoc = text.replaceAll(
      /@default\s+([^\n]*?)(\s*\*\/)?$/gm,
      (_all, value: string, end = '') => `@defaultValue ${value.replaceAll(/[{}]/g, (c) => `\\${c}`)}${end}`,
    );
    writeFileSync(path.join(dts, file), tsdoc);
  }
  const model = path.join(scratch, 'model');
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: path.join(dts, 'lib', 'index.d.ts'),
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            target: 'es2022',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            types: ['node'],
          },
          files: [path.join(dts, 'lib', 'index.d.ts')],
        },
        skipLibCheck: true,
      },
      apiReport: { enabled: false },
      docModel: { enabled: true, apiJsonFilePath: path.join(model, '<unscopedPackageName>.api.json') },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        // Types the entry uses but does not export (the constructs' building blocks) are
        // referenced by name; they are not part of the reference.
        extractorMessageReporting: {
          'ae-forgotten-export': { logLevel: ExtractorLogLevel.None },
          'ae-missing-release-tag': { logLevel: ExtractorLogLevel.None },
        },
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: path.join(root, 'package.json'),
  });
  const result = Extractor.invoke(config, { localBuild: true, showVerboseMessages: false });
  if (!result.succeeded) throw new Error(`API Extractor: ${result.errorCount} errors`);
  const pages = path.join(scratch, 'pages');
  execFileSync(process.execPath, [bin('api-documenter'), 'markdown', '-i', model, '-o', pages], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const made = tree(pages);
  if (check) {
    const have = tree(docs);
    const differ = [...new Set([...made.keys(), ...have.keys()])].filter((f) => made.get(f) !== have.get(f));
    if (differ.length > 0) {
      process.stderr.write(`docs/api is out of date (npm run docs:api): ${differ.slice(0, 10).join(', ')}\n`);
      process.exit(1);
    }
    process.stdout.write(`docs/api is up to date (${made.size} pages)\n`);
  } else {
    rmSync(docs, { recursive: true, force: true });
    for (const [file, text] of made) {
      mkdirSync(path.dirname(path.join(docs, file)), { recursive: true });
      writeFileSync(path.join(docs, file), text);
    }
    process.stdout.write(`wrote ${made.size} pages to docs/api\n`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
