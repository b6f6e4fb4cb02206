import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
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
});
