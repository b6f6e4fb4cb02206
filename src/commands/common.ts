import { randomBytes } from 'node:crypto';
import type { Style } from '../api/wire.js';
import { serviceConfig } from '../config.js';
import { UsageError } from '../errors.js';
import { stylesFailure } from '../stages/outcomes.js';

/** What every command gets instead of reaching for globals (tests pass their own). */
export interface CommandDeps {
  stdout: { write(text: string): unknown; isTTY?: boolean };
  stderr: { write(text: string): unknown; isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Soft stop (first SIGINT/SIGTERM). */
  signal?: AbortSignal;
  /** Hard stop (second signal). */
  hardSignal?: AbortSignal;
}

/** A service to talk to: the configured one, or the built-in sandbox started for this command. */
export interface ServiceTarget {
  baseUrl: string;
  apiKey: string;
  sandbox: boolean;
  close(): Promise<void>;
}

/**
 * Resolves the service from `--sandbox`, flags and environment. With `--sandbox` the emulator starts
 * on a free loopback port with a random key for this process only.
 */
export async function serviceTarget(
  values: {
    'base-url'?: string | undefined;
    'api-key-file'?: string | undefined;
    sandbox?: boolean | undefined;
  },
  deps: CommandDeps,
  required: boolean,
): Promise<ServiceTarget | null> {
  if (values.sandbox) {
    if (values['base-url']) throw new UsageError('--sandbox and --base-url exclude each other');
    const apiKey = `sandbox_${randomBytes(12).toString('hex')}`;
    // The sandbox's code (an HTTP server, its images) only for a command started with --sandbox.
    const { startSandbox } = await import('../sandbox/index.js');
    const sandbox = await startSandbox({ apiKey, processingMs: 1500, jitterMs: 500 });
    return { baseUrl: sandbox.url, apiKey, sandbox: true, close: () => sandbox.close() };
  }
  const config = serviceConfig(values, deps.env);
  for (const warning of config.warnings) deps.stderr.write(`warning: ${warning}\n`);
  if (!config.baseUrl || !config.apiKey) {
    if (!required) return null;
    throw new UsageError(
      !config.baseUrl
        ? 'no service URL: set KITCHEN_API_BASE_URL or pass --base-url (or try --sandbox)'
        : 'no API key: set KITCHEN_API_KEY or pass --api-key-file (or try --sandbox)',
    );
  }
  return { baseUrl: config.baseUrl, apiKey: config.apiKey, sandbox: false, close: async () => {} };
}

/**
 * `GET /v1/styles` once (no retries: a command a person waits for), then closes the target. A
 * refused key or an unreachable service is a `ServiceRefusedError` (exit 3), as in a run; any other
 * refusal is thrown as it is. `null` when the answer's shape is not understood.
 */
export async function fetchStyles(service: ServiceTarget): Promise<Style[] | null> {
  // The client (and its HTTP library) only for a command that asks the service.
  const { KitchenClient } = await import('../api/client.js');
  const client = new KitchenClient({ baseUrl: service.baseUrl, apiKey: service.apiKey });
  try {
    return await client.listStyles();
  } catch (error) {
    const outcome = stylesFailure(error, service.baseUrl);
    throw outcome.kind === 'fatal' ? outcome.error : error;
  } finally {
    client.close();
    await service.close();
  }
}
