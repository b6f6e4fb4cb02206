/**
 * A preload (`node --import`) that writes the URL of every module the process resolves, one a line,
 * to the file named by `MODULE_LOG_FILE`: ESM imports, dynamic `import()` and `require()` alike
 * (`module.registerHooks`, Node.js 22.15 and later). test/cli/lazy-imports.test.ts reads it to see
 * what a run loaded. Plain JavaScript, so it runs before any TypeScript loader is there.
 */
import { appendFileSync } from 'node:fs';
import module from 'node:module';

const file = process.env.MODULE_LOG_FILE;
if (file && typeof module.registerHooks === 'function') {
  const seen = new Set();
  module.registerHooks({
    resolve(specifier, context, nextResolve) {
      const result = nextResolve(specifier, context);
      if (!seen.has(result.url)) {
        seen.add(result.url);
        appendFileSync(file, `${result.url}\n`);
      }
      return result;
    },
  });
}
