import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const support = join('test', 'support');

/** Every .ts file under `dir`, as paths relative to the repository root. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [relative(root, path)] : [];
  });
}

/**
 * The relative specifiers a file imports or re-exports statically: `import ... from`,
 * `import type ... from`, `import '...'` and `export ... from`. Dynamic `import()` is left out on
 * purpose: it is how a module reaches one it must not load eagerly (sharp, a child process's
 * entry), so it does not tie the two files' load order the way a static import does.
 */
function imports(text: string): string[] {
  const found: string[] = [];
  const pattern = /(?:^|[\s;}])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/g;
  for (const match of text.matchAll(pattern)) {
    const spec = match[1];
    if (spec?.startsWith('.')) found.push(spec);
  }
  return found;
}

/** Where the .ts files under `dir` import from: each file with the repository paths its specifiers name. */
function importsOf(dir: string): Array<{ file: string; targets: string[] }> {
  return sources(join(root, dir)).map((file) => {
    const text = readFileSync(join(root, file), 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
    return {
      file,
      targets: imports(text).map((spec) => relative(root, resolve(root, dirname(file), spec))),
    };
  });
}

/** The file graph of src/: each file to the src/ files it imports. */
function graph(): Map<string, string[]> {
  const files = sources(src);
  const known = new Set(files);
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
    const targets = imports(text).map((spec) =>
      relative(root, resolve(root, dirname(file), spec)).replace(/\.js$/, '.ts'),
    );
    for (const target of targets) {
      if (!known.has(target)) throw new Error(`${file} imports ${target}, which is not a file of src/`);
    }
    edges.set(file, [...new Set(targets)].sort());
  }
  return edges;
}

/** The graph's strongly connected components of more than one file (or a file importing itself). */
function cycles(edges: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const target of edges.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(target) ?? 0));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(target) ?? 0));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop();
        if (member === undefined) break;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || edges.get(node)?.includes(node)) found.push(component.sort());
    }
  };
  for (const node of [...edges.keys()].sort()) if (!index.has(node)) visit(node);
  return found.sort((a, b) => (a[0] ?? '').localeCompare(b[0] ?? ''));
}

/** Within a component, one import path back to its start, for the failure message. */
function loop(edges: Map<string, string[]>, component: string[]): string {
  const members = new Set(component);
  const start = component[0] ?? '';
  const seen = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift() ?? '';
    for (const target of edges.get(node) ?? []) {
      if (!members.has(target)) continue;
      if (target === start) {
        const path = [start];
        for (let at = node; at !== start; at = seen.get(at) ?? start) path.splice(1, 0, at);
        return [...path, start].join(' → ');
      }
      if (!seen.has(target)) {
        seen.set(target, node);
        queue.push(target);
      }
    }
  }
  return component.join(', ');
}

/** Longest a file of src/ may be, in lines (issue 31). */
const MAX_FILE_LINES = 400;
/** Longest a class may be, in lines from its `class` keyword to its closing brace (issue 31). */
const MAX_CLASS_LINES = 300;

/**
 * The folders of src/ from the bottom up: a file may import from its own level or a lower one,
 * never a higher one (/work/shared/STYLE.md "A layout we like", and the imports as they are).
 * A path is placed by its longest listed prefix; the files at the root of src/ are listed each.
 * Folders that do not exist yet (storage/, stages/) are placed where they are being built.
 */
const LEVELS: readonly (readonly string[])[] = [
  // Domain types, error codes and limits: what every layer names.
  ['src/errors.ts', 'src/types.ts', 'src/limits.ts', 'src/node-version.ts'],
  // Type modules kept apart from their folder so that lower layers can name them without loading
  // it: the review's verdict (state/ records it; compare.ts would load sharp) and the run's events
  // (the reports and the review follow them).
  ['src/review/flags.ts', 'src/pipeline/events.ts'],
  ['src/util/'],
  ['src/storage/'],
  ['src/image/'],
  ['src/api/', 'src/state/', 'src/manifest/', 'src/sandbox/'],
  ['src/preflight/'],
  ['src/review/'],
  ['src/report/', 'src/metrics/'],
  ['src/stages/'],
  ['src/pipeline/', 'src/worker/'],
  // The commands' flags, declared once (a table that imports only lower levels), and flags and
  // environment to validated options.
  ['src/commands/command-table.ts'],
  ['src/config.ts'],
  ['src/commands/'],
  ['src/cli.ts', 'src/launch.ts', 'src/bin.ts', 'src/index.ts'],
];

/** The level of a file of src/ in {@link LEVELS} (by its longest listed prefix), or null when unlisted. */
function levelOf(file: string): number | null {
  let best: { level: number; length: number } | null = null;
  LEVELS.forEach((entries, level) => {
    for (const entry of entries) {
      const matches = entry.endsWith('/') ? file.startsWith(entry) : file === entry;
      if (matches && (best === null || entry.length > best.length)) best = { level, length: entry.length };
    }
  });
  return best === null ? null : (best as { level: number }).level;
}

/** Imports from a lower level to a higher one (`from → to`), and files no level places. */
function upwardImports(edges: Map<string, string[]>): string[] {
  const found: string[] = [];
  for (const [file, targets] of edges) {
    const from = levelOf(file);
    if (from === null) {
      found.push(`${file} is in no level of LEVELS`);
      continue;
    }
    for (const target of targets) {
      const to = levelOf(target);
      if (to !== null && to > from) found.push(`${file} → ${target}`);
    }
  }
  return found.sort();
}

/** Files of `text` lines over {@link MAX_FILE_LINES}, as `path: lines`. */
function longFiles(files: ReadonlyArray<{ file: string; text: string }>): string[] {
  return files.flatMap(({ file, text }) => {
    // A final newline ends the last line; it does not start another.
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    return lines > MAX_FILE_LINES ? [`${file}: ${lines} lines`] : [];
  });
}

/**
 * Classes over {@link MAX_CLASS_LINES}, as `path: Name lines`, found by the TypeScript parser (class
 * declarations and class expressions, nested ones too), so that a brace in a string, a regex or a
 * template is not taken for the class's end.
 */
function longClasses(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      // From the `class` line (decorators and JSDoc not counted) to the closing brace, both included.
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > MAX_CLASS_LINES)
        found.push(`${file}: ${node.name?.text ?? '(anonymous class)'} ${lines} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every .ts file of src/ with its text. */
function srcTexts(): Array<{ file: string; text: string }> {
  return sources(src).map((file) => ({ file, text: readFileSync(join(root, file), 'utf8') }));
}

describe('src/ layout', () => {
  it('the import parser sees static, type-only and re-exporting imports, not dynamic ones', () => {
    const text = [
      "import { a } from './a.js';",
      "import type { B } from '../b.js';",
      "import {\n  c,\n  type D,\n} from './c.js';",
      "export { e } from './e.js';",
      "export type * from './f.js';",
      "import './g.js';",
      "import sharp from 'sharp';",
      "const h = await import('./h.js');",
    ].join('\n');
    expect(imports(text)).toEqual(['./a.js', '../b.js', './c.js', './e.js', './f.js', './g.js']);
  });

  it('no import circle between files of src/', () => {
    const edges = graph();
    const found = cycles(edges).map((component) => loop(edges, component));
    if (found.length > 0) console.log(`import circles in src/:\n${found.join('\n')}`);
    expect(found).toEqual([]);
  });

  it('bench/ and scripts/ take fixtures from test/support/ only, and test/support/ needs nothing else of test/', () => {
    const outside = (from: string[], allowed: string) =>
      from.flatMap((dir) =>
        importsOf(dir).flatMap(({ file, targets }) =>
          targets
            .filter((target) => target.startsWith('test/') && !target.startsWith(`${allowed}/`))
            .map((target) => `${file} imports ${target}`),
        ),
      );
    expect(outside(['bench', 'scripts'], support)).toEqual([]);
    expect(outside([support], support)).toEqual([]);
  });
  it(`no file of src/ over ${MAX_FILE_LINES} lines`, () => {
    expect(longFiles(srcTexts())).toEqual([]);
  });

  it(`no class of src/ over ${MAX_CLASS_LINES} lines`, () => {
    const found = srcTexts().flatMap(({ file, text }) => longClasses(file, text));
    expect(found).toEqual([]);
  });

  it('no import from a lower folder of src/ to a higher one (LEVELS), and every file has a level', () => {
    expect(upwardImports(graph())).toEqual([]);
  });

  it('the size and order rules catch what they are for', () => {
    // A class of 301 lines (braces in strings and a regex do not end it) and a file of 401.
    const body = Array.from({ length: 299 }, (_, i) => `  m${i}() { return '}' + /}/.source; }`).join('\n');
    const text = `export class Big {\n${body}\n}\n`;
    expect(longClasses('src/x.ts', text)).toEqual(['src/x.ts: Big 301 lines']);
    expect(longClasses('src/x.ts', text.replace('  m0() {', '  // m0() {\n  m0() {'))).toEqual([
      'src/x.ts: Big 302 lines',
    ]);
    expect(longClasses('src/x.ts', 'class Small {}\n')).toEqual([]);
    const lines = (n: number) => `${'x\n'.repeat(n)}`;
    expect(longFiles([{ file: 'src/a.ts', text: lines(400) }])).toEqual([]);
    expect(longFiles([{ file: 'src/a.ts', text: lines(401) }])).toEqual(['src/a.ts: 401 lines']);
    // util/ may not import api/; api/ may import util/, a peer, and a lower type module.
    const edges = new Map([
      ['src/util/x.ts', ['src/api/client.ts']],
      ['src/api/y.ts', ['src/util/fs.ts', 'src/state/journal.ts', 'src/review/flags.ts']],
      ['src/state/z.ts', ['src/review/compare.ts']],
      ['src/elsewhere/w.ts', []],
    ]);
    expect(upwardImports(edges)).toEqual([
      'src/elsewhere/w.ts is in no level of LEVELS',
      'src/state/z.ts → src/review/compare.ts',
      'src/util/x.ts → src/api/client.ts',
    ]);
  });
});
