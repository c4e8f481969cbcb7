/**
 * cfn-lint (the CloudFormation linter, a Python tool) run on synthesized templates. It checks
 * what CDK does not: property values against the CloudFormation resource specification of the
 * region, intrinsic functions, and a set of best-practice rules.
 */
import { spawnSync } from 'node:child_process';

/** What to do when the tool is missing (npm test provisions it first, scripts/python-tools.sh). */
export const CFN_LINT_ADVICE =
  'cfn-lint is not installed: npm test installs it into .tools/python when Python 3 is there (scripts/python-tools.sh); or put cfn-lint on PATH, or set CFN_LINT';

/** The command to run: `$CFN_LINT` when set, else `cfn-lint` on PATH. */
export function cfnLintCommand(env: NodeJS.ProcessEnv = process.env): string {
  return env.CFN_LINT || 'cfn-lint';
}

/** The installed version (`cfn-lint 1.x.y`); throws the install advice when `command` is missing. */
export function cfnLintVersion(command = cfnLintCommand()): string {
  const out = spawnSync(command, ['--version'], { encoding: 'utf8', timeout: 60_000 });
  if (out.error || out.status !== 0) {
    throw new Error(`${CFN_LINT_ADVICE} (${command}: ${out.error?.message ?? `exit ${out.status}`})`);
  }
  return out.stdout.trim();
}

export interface CfnLintFinding {
  readonly rule: string;
  readonly level: 'Error' | 'Warning' | 'Informational';
  readonly file: string;
  /** Where in the template, e.g. `Resources/MyFunction/DependsOn`. */
  readonly path: string;
  readonly message: string;
}

interface RawMatch {
  Rule: { Id: string };
  Level: CfnLintFinding['level'];
  Filename: string;
  Location: { Path?: (string | number)[] | null };
  Message: string;
}

/** Lints every template in one cfn-lint process (its start-up dominates the run time). */
export function runCfnLint(templates: readonly string[], command = cfnLintCommand()): CfnLintFinding[] {
  const out = spawnSync(command, ['--format', 'json', '--', ...templates], {
    encoding: 'utf8',
    timeout: 180_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (out.error) throw new Error(`${CFN_LINT_ADVICE} (${command}: ${out.error.message})`);
  // Exit codes are a bit mask of the levels found (2 error, 4 warning, 8 info); 1 is a failure.
  if (out.status === 1 || out.stdout.trim() === '') {
    throw new Error(`cfn-lint failed (exit ${out.status}): ${out.stderr.slice(0, 2000)}`);
  }
  return (JSON.parse(out.stdout) as RawMatch[]).map((m) => ({
    rule: m.Rule.Id,
    level: m.Level,
    file: m.Filename,
    path: (m.Location.Path ?? []).join('/'),
    message: m.Message,
  }));
}

/** A finding accepted on purpose: which rule, which findings (by message), and why. */
export interface AllowedFinding {
  readonly rule: string;
  /** A regular expression the finding's message must match. */
  readonly message: string;
  readonly reason: string;
}

/** Splits findings into those the allow-list covers and the rest; also names unused entries. */
export function applyAllowList(findings: readonly CfnLintFinding[], allowed: readonly AllowedFinding[]) {
  const used = new Set<AllowedFinding>();
  const unexplained: CfnLintFinding[] = [];
  for (const f of findings) {
    const entry =
      f.level === 'Error'
        ? undefined
        : allowed.find((a) => a.rule === f.rule && new RegExp(a.message).test(f.message));
    if (entry) used.add(entry);
    else unexplained.push(f);
  }
  return { unexplained, unused: allowed.filter((a) => !used.has(a)) };
}
