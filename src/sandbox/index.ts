/**
 * The built-in sandbox: a real HTTP server implementing the whole service spec with fault knobs,
 * used by tests, by `run --sandbox` (in-process, free loopback port) and by `kitchen-batch sandbox`.
 */
import type { SandboxFaults } from './faults.js';
import { SandboxServer } from './server.js';
import type { Sandbox, SandboxOptions } from './types.js';

export type { BadResult, FaultScope, ResultFault, RetryAfterMode, SandboxFaults } from './faults.js';
export { DEFAULT_FAULTS } from './faults.js';
export { SANDBOX_FLAGS, sandboxOptionsFromFlags } from './flags.js';
export type { ResultMode } from './images.js';
export { SANDBOX_STYLES, STYLES_SHAPES, type StylesShape } from './style-catalogue.js';
export type {
  Sandbox,
  SandboxOptions,
  SandboxRequestRecord,
  SandboxStats,
  StorageRequestRecord,
} from './types.js';

/**
 * Starts a sandbox and resolves once it listens. Always `close()` it: it also destroys hung
 * sockets, so a test never waits on a request the sandbox chose not to answer.
 */
export async function startSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  const server = new SandboxServer(options);
  await server.listen();
  return {
    url: server.url,
    port: server.port,
    apiKey: server.apiKey,
    stats: server.stats,
    setFaults: (faults: Partial<SandboxFaults>) => server.setFaults(faults),
    reset: () => server.resetStats(),
    close: () => server.close(),
  };
}
