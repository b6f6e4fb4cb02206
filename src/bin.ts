#!/usr/bin/env node
/**
 * The `kitchen-batch` executable. It first checks the Node.js version, with nothing else loaded (the
 * dependencies need a newer Node and would fail somewhere later, with a worse message), then loads
 * the process wiring (`launch.ts`) and with it the CLI.
 */
import { EXIT } from './errors.js';
import { unsupportedNode } from './node-version.js';

const unsupported = unsupportedNode(process.versions.node);
if (unsupported) {
  process.stderr.write(`kitchen-batch: ${unsupported}\n`);
  // Scripts that asked for JSON get JSON on stdout whatever happened (docs/contract.md#stdout-and-stderr).
  if (process.argv.includes('--json')) {
    const error = { code: 'unsupported_node', message: unsupported };
    process.stdout.write(`${JSON.stringify({ exit_code: EXIT.usage, error })}\n`);
  }
  process.exitCode = EXIT.usage;
} else {
  await import('./launch.js');
}
