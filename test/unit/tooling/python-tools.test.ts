/**
 * scripts/python-tools.sh, which npm test and npm run test:moto use to find or provision cfn-lint
 * and moto_server (OPS-03: the single-endpoint run needs moto). Run on a copy of the script in a
 * scratch "repository", with a PATH of stand-in commands: the machine's tools are used as they are;
 * missing ones are installed, at the pinned versions, into .tools/python by a venv and its pip
 * (here a stand-in python3 whose pip writes the tool, since PyPI is not reached from tests);
 * without Python 3 the script says what to install.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';

const SCRIPT = new URL('../../../scripts/python-tools.sh', import.meta.url).pathname;

function executable(file: string, body: string): void {
  writeFileSync(file, `#!/bin/bash\n${body}\n`);
  chmodSync(file, 0o755);
}

describe('the tests’ Python tools', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'python-tools-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  let repo: string;
  let bin: string;

  beforeEach(() => {
    repo = mkdtempSync(join(scratch, 'repo-'));
    mkdirSync(join(repo, 'scripts'));
    copyFileSync(SCRIPT, join(repo, 'scripts', 'python-tools.sh'));
    // Only what the script needs from the system, and no Python tool.
    bin = join(repo, 'bin');
    mkdirSync(bin);
    for (const tool of ['dirname', 'rm', 'cat', 'mkdir', 'chmod']) {
      executable(join(bin, tool), `exec /usr/bin/env -S PATH=/usr/bin:/bin ${tool} "$@"`);
    }
  });

  /** Sources the script for `tools` and prints what it exported. */
  function provision(tools: string[], env: Record<string, string> = {}) {
    const run = spawnSync(
      '/bin/bash',
      [
        '-c',
        `. scripts/python-tools.sh ${tools.join(' ')}; rc=$?; echo "rc=$rc cfn=\${CFN_LINT-unset} moto=\${MOTO_SERVER-unset}"`,
      ],
      { cwd: repo, encoding: 'utf8', env: { PATH: bin, HOME: repo, ...env } },
    );
    return { out: run.stdout.trim(), err: run.stderr };
  }

  it('uses a tool already on PATH, or named by its variable, as it is', () => {
    executable(join(bin, 'cfn-lint'), 'echo cfn-lint 1.0.0');
    expect(provision(['cfn-lint']).out).toBe(`rc=0 cfn=${join(bin, 'cfn-lint')} moto=unset`);
    const own = join(repo, 'my-moto');
    executable(own, 'exit 0');
    expect(provision(['moto'], { MOTO_SERVER: own }).out).toBe(`rc=0 cfn=unset moto=${own}`);
  });

  it('installs a missing tool at its pinned version into .tools/python, once', () => {
    const log = join(repo, 'pip.log');
    // python3 -m venv DIR makes DIR/bin/pip; that pip records its arguments and writes the tools.
    executable(
      join(bin, 'python3'),
      `[ "$1 $2" = "-m venv" ] || exit 1
mkdir -p "$3/bin"
cat > "$3/bin/pip" <<'PIP'
#!/bin/bash
echo "$@" >> ${log}
d="$(cd "$(dirname "$0")" && pwd)"
printf '#!/bin/bash\\nexit 0\\n' > "$d/cfn-lint"; printf '#!/bin/bash\\nexit 0\\n' > "$d/moto_server"
chmod +x "$d/cfn-lint" "$d/moto_server"
PIP
chmod +x "$3/bin/pip"`,
    );
    const venv = join(repo, '.tools', 'python', 'bin');
    const first = provision(['cfn-lint', 'moto']);
    expect(first.out).toBe(`rc=0 cfn=${venv}/cfn-lint moto=${venv}/moto_server`);
    expect(first.err).toContain('creating a Python virtual environment in .tools/python');
    expect(readFileSync(log, 'utf8')).toMatch(
      /^install .*cfn-lint==\d+\.\d+\.\d+ moto\[server\]==5\.2\.1\n$/,
    );
    // The second run finds them there and installs nothing.
    expect(provision(['cfn-lint', 'moto']).out).toBe(first.out);
    expect(readFileSync(log, 'utf8').split('\n').filter(Boolean)).toHaveLength(1);
  });

  it('without Python 3 says what to install, and fails', () => {
    const r = provision(['cfn-lint']);
    expect(r.out).toBe('rc=1 cfn=unset moto=unset');
    expect(r.err).toContain('Python 3 is needed for cfn-lint==');
    expect(r.err).toContain('apt-get install -y python3 python3-venv');
  });
});
