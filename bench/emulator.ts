/**
 * The scale benchmark's emulator, in a process of its own so that the client's memory and CPU are
 * measured alone: the sandbox with instant jobs, no faults, and results rendered once per upload
 * and style, then kept (`render-once`: a warm-up run pays for the image work, the measured runs
 * get restyles with none), or echo results (the upload itself). Prints its URL on the first line
 * of stdout; each line `stats` on stdin is answered with one line of request counts (JSON); stdin
 * closing stops it.
 *
 * Run by `bench/scale.ts`: `node --import tsx bench/emulator.ts <maxJobs> [render-once|echo]`.
 */
import { createInterface } from 'node:readline';
import { startSandbox } from '../src/sandbox/index.js';
import { countRequests } from './util.js';

const maxJobs = Number(process.argv[2] ?? 1000);
const results = process.argv[3] === 'echo' ? 'echo' : 'render-once';
const sandbox = await startSandbox({
  apiKey: null,
  processingMs: 0,
  jitterMs: 0,
  queuedMs: 0,
  results,
  maxJobs,
});
process.stdout.write(`${sandbox.url}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === 'stats') {
    process.stdout.write(`${JSON.stringify(countRequests(sandbox.stats.requests))}\n`);
  } else if (line.trim() === 'reset') {
    sandbox.reset();
    process.stdout.write('{}\n');
  }
}
await sandbox.close();
