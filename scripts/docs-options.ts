/**
 * `npm run docs:options`: writes the README's option tables anew from the commands' flag
 * declarations (src/commands/command-table.ts), so the README lists what the CLI parses.
 * test/cli/help.test.ts fails, naming this command, when the README is behind.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { withOptionTables } from '../src/commands/help.js';

const readme = new URL('../README.md', import.meta.url);
const before = await readFile(readme, 'utf8');
const after = withOptionTables(before);
if (after !== before) await writeFile(readme, after);
process.stdout.write(
  after === before ? 'README.md: option tables up to date\n' : 'README.md: option tables written\n',
);
