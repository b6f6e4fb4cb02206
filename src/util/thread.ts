/**
 * Worker threads from this package's own modules. Built (`dist/`), a module is plain JavaScript
 * and starts as it is. Run from the TypeScript sources (the tests, `npm run bench`), the thread
 * first registers tsx's loader, which a worker does not inherit from its parent.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/** Registers tsx (its ESM API), then imports the TypeScript entry. */
const TS_BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
import(workerData.__tsx).then((tsx) => { tsx.register(); return import(workerData.__entry); });
`;

/**
 * Starts the module `name` that lies beside `from` (the caller's `import.meta.url`; its extension
 * says whether the sources run as TypeScript) in a worker thread.
 */
export function startThread(name: string, from: string, options: WorkerOptions = {}): Worker {
  const typescript = from.endsWith('.ts');
  const entry = new URL(`./${name}.${typescript ? 'ts' : 'js'}`, from);
  if (!typescript) return new Worker(entry, options);
  return new Worker(TS_BOOTSTRAP, {
    ...options,
    eval: true,
    workerData: { ...(options.workerData as object), __tsx: tsxApi(from), __entry: entry.href },
  });
}

/** The URL of tsx's ESM API (`tsx/esm/api`; its CommonJS build cannot register from a thread). */
function tsxApi(from: string): string {
  const manifest = createRequire(from).resolve('tsx/package.json');
  const exports = JSON.parse(readFileSync(manifest, 'utf8')).exports['./esm/api'];
  return new URL(exports.import.default, pathToFileURL(manifest)).href;
}
