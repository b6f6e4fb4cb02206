/**
 * The process wiring of the `kitchen-batch` executable (signals, sharp's cache, the exit code);
 * everything else is in cli.ts. Loaded by `bin.ts` once the Node.js version is known to be supported.
 */
import { main, stopNotice } from './cli.js';
import { EXIT, InterruptedError } from './errors.js';
import { dropSharpCache } from './image/sharp-cache.js';

// libvips' operation cache only holds memory in a batch, which reads every image once: off for
// the sharp a command loads (image/sharp.ts), and only then (a command may decode no image).
dropSharpCache();

/** Wires process signals: the first asks for a clean stop, the second aborts in-flight requests and exits. */
function signals(argv: readonly string[]): { signal: AbortSignal; hardSignal: AbortSignal } {
  const soft = new AbortController();
  const hard = new AbortController();
  let count = 0;
  const onSignal = (name: NodeJS.Signals) => {
    count++;
    if (count === 1) {
      process.stderr.write(stopNotice(argv, name));
      soft.abort(new InterruptedError(name));
    } else {
      hard.abort(new InterruptedError(name));
      process.exit(EXIT.interrupted);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { signal: soft.signal, hardSignal: hard.signal };
}

{
  const argv = process.argv.slice(2);
  const { signal, hardSignal } = signals(argv);
  const code = await main(argv, {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    signal,
    hardSignal,
  });
  process.exitCode = code;
  // Give stdout a chance to drain, then leave even if a stray handle lingers.
  setTimeout(() => process.exit(code), 200).unref();
}
