/**
 * The shape of the repository's own documentation: a README a newcomer reads to the end, tables
 * whose cells fit on a screen, docs that speak of the product rather than of its issue tracker,
 * an ARCHITECTURE.md that opens with its glossary, and relative links that lead somewhere.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const MAX_README_LINES = 300;
const MAX_CELL_CHARS = 300;

/** README.md, ARCHITECTURE.md, CONTRIBUTING.md and every Markdown file under docs/, repository-relative. */
function docFiles(): string[] {
  const docs = readdirSync(path.join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join('docs', f).split(path.sep).join('/'));
  return ['README.md', 'ARCHITECTURE.md', 'CONTRIBUTING.md', ...docs.sort()];
}

const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

/** Lines outside fenced code blocks, with their 1-based numbers. */
function proseLines(text: string): { n: number; line: string }[] {
  const out: { n: number; line: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, i) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && open) fence = open[0];
    else if (fence !== undefined && open?.[0] === fence) fence = undefined;
    else if (fence === undefined) out.push({ n: i + 1, line });
  });
  return out;
}

function lineCount(text: string): number {
  const lines = text.split('\n').length;
  return text.endsWith('\n') ? lines - 1 : lines;
}

/** Cells of Markdown table rows longer than `max` characters (a `\|` stays inside its cell). */
function longCells(text: string, max = MAX_CELL_CHARS): { n: number; chars: number }[] {
  const out: { n: number; chars: number }[] = [];
  for (const { n, line } of proseLines(text)) {
    if (!line.trimStart().startsWith('|')) continue;
    for (const cell of line
      .trim()
      .replace(/^\||\|$/g, '')
      .split(/(?<!\\)\|/)) {
      const chars = [...cell.trim()].length;
      if (chars > max) out.push({ n, chars });
    }
  }
  return out;
}

/**
 * "issue 13", "issues 12 and 13", "Issue #7", "#13": the tracker's words. Requirement ids
 * (SEC-01), HTTP status codes (409), anchors (#the-console) and entities (&#39;) do not match.
 */
const ISSUE_NUMBER = /\bissues?\s+#?\d+|(?<![\w&#/])#\d+\b/gi;

function issueNumbers(text: string): { n: number; match: string }[] {
  return text
    .split('\n')
    .flatMap((line, i) => [...line.matchAll(ISSUE_NUMBER)].map((m) => ({ n: i + 1, match: m[0] })));
}

/** True when the first non-blank line after the title is the Glossary section's heading. */
function opensWithGlossary(text: string): boolean {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return /^# /.test(lines[0] ?? '') && /^## Glossary\s*$/.test(lines[1] ?? '');
}

/** GitHub's anchors of a file's headings (lowercase, punctuation dropped, spaces to hyphens, -1 for repeats). */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const { line } of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Relative link targets of a Markdown file: inline links and images, outside code. */
function relativeLinks(text: string): { n: number; target: string }[] {
  const out: { n: number; target: string }[] = [];
  for (const { n, line } of proseLines(text)) {
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1] as string;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('/')) continue;
      out.push({ n, target });
    }
  }
  return out;
}

/** Links of `file` whose file (or heading anchor) does not exist. */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const { n, target } of relativeLinks(read(file))) {
    const [rel = '', anchor] = target.split('#', 2);
    const resolved =
      rel === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(rel)));
    if (!existsSync(path.join(root, resolved))) {
      broken.push(`${file}:${n} → ${target} (no such file)`);
      continue;
    }
    if (anchor && resolved.endsWith('.md') && !anchorsOf(read(resolved)).has(anchor))
      broken.push(`${file}:${n} → ${target} (no such heading)`);
  }
  return broken;
}

describe('the shape of the docs', () => {
  const files = docFiles();

  it('covers README, ARCHITECTURE, CONTRIBUTING and the pages under docs/', () => {
    for (const f of ['README.md', 'ARCHITECTURE.md', 'CONTRIBUTING.md', 'docs/README.md'])
      expect(files).toContain(f);
  });

  it(`README.md has at most ${MAX_README_LINES} lines`, () => {
    expect(lineCount(read('README.md'))).toBeLessThanOrEqual(MAX_README_LINES);
  });

  it(`no table cell is longer than ${MAX_CELL_CHARS} characters`, () => {
    const long = files.flatMap((f) => longCells(read(f)).map(({ n, chars }) => `${f}:${n} (${chars})`));
    expect(long).toEqual([]);
  });

  it('no page names an issue number', () => {
    const named = files.flatMap((f) => issueNumbers(read(f)).map(({ n, match }) => `${f}:${n} "${match}"`));
    expect(named).toEqual([]);
  });

  it('ARCHITECTURE.md opens, after its title, with the Glossary', () => {
    expect(opensWithGlossary(read('ARCHITECTURE.md'))).toBe(true);
  });

  it('every relative link leads to a file, and to a heading where it names one', () => {
    expect(files.flatMap(brokenLinks)).toEqual([]);
  });
});

describe('the checks themselves', () => {
  it('counts lines as wc -l does', () => {
    expect(lineCount('a\nb\n')).toBe(2);
    expect(lineCount('a\nb')).toBe(2);
  });

  it('measures cells of table rows only, outside code, keeping an escaped pipe in its cell', () => {
    const long = 'x'.repeat(301);
    expect(longCells(`| a | ${long} |`)).toEqual([{ n: 1, chars: 301 }]);
    expect(longCells(`| a | ${'x'.repeat(150)} \\| ${'x'.repeat(150)} |`)).toHaveLength(1);
    expect(longCells(`| a | ${'x'.repeat(150)} | ${'x'.repeat(150)} |`)).toEqual([]);
    expect(longCells(`${long}\n\`\`\`\n| ${long} |\n\`\`\``)).toEqual([]);
  });

  it('finds issue numbers, but not requirement ids, status codes, anchors or entities', () => {
    const found = (s: string) => issueNumbers(s).map((m) => m.match);
    expect(found('as in issue 13, issues 12 and 13, Issue #7 and #13')).toEqual([
      'issue 13',
      'issues 12',
      'Issue #7',
      '#13',
    ]);
    expect(found("issue 13's targets")).toEqual(['issue 13']);
    expect(found('SEC-01, HTTP 500, 409 dependency_conflict, [x](#the-console), &#39;, a/#1')).toEqual([]);
  });

  it('wants the Glossary right after the title', () => {
    expect(opensWithGlossary('# Architecture\n\n## Glossary\n')).toBe(true);
    expect(opensWithGlossary('# Architecture\n\nIntro.\n\n## Glossary\n')).toBe(false);
    expect(opensWithGlossary('# Architecture\n\n## Layers\n\n## Glossary\n')).toBe(false);
  });

  it('reads relative links and GitHub anchors', () => {
    const text = '[a](docs/x.md#y) ![b](p.png) [c](https://e.x) [d](#z) `[e](f.md)`\n```\n[g](h.md)\n```';
    expect(relativeLinks(text).map((l) => l.target)).toEqual(['docs/x.md#y', 'p.png', '#z']);
    expect([...anchorsOf('# T\n## Producer endpoints (`/ext/queues/v1`)\n## A — B\n## A — B\n')]).toEqual([
      't',
      'producer-endpoints-extqueuesv1',
      'a--b',
      'a--b-1',
    ]);
  });
});
