/**
 * The one S3 client of a run (issue 32 for sources, issue 33 reuses it for outputs), configured the
 * way the AWS SDK v3 documents it: the SDK's default credential chain, the region from the
 * environment or shared config, `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` for MinIO, R2, GCS and
 * friends. Credentials are never read, logged or written here: only the SDK holds key material, and
 * {@link describeS3Access} says where it came from (a source name), never what it is.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { loadConfig, NODE_REGION_CONFIG_FILE_OPTIONS, NODE_REGION_CONFIG_OPTIONS } from '@smithy/core/config';
import { UsageError } from '../../errors.js';
import { DirectPut } from './direct-put.js';

/** The environment variables this module reads (a subset of `process.env`). */
export type S3Env = Readonly<Record<string, string | undefined>>;

/** Options of {@link createS3Client}. */
export interface S3ClientOptions {
  /**
   * Attempts per S3 call, the first included: the SDK's own retries (standard mode: exponential
   * back-off with jitter on 5xx, SlowDown, throttling, resets and timeouts). Bounded so that an
   * unreachable store becomes `source_unavailable` in seconds, not minutes.
   * @default 4
   */
  maxAttempts?: number;
  /**
   * Region used when neither the environment nor the shared config names one. With
   * `followRegionRedirects` a bucket in another region still works (one extra round trip).
   * @default 'us-east-1'
   */
  defaultRegion?: string;
  /**
   * How long one attempt may wait for the connection, and then for the socket to make progress,
   * before it fails as a timeout that the SDK retries (the SDK's own default is to wait for ever,
   * so a store that stops answering would hang a run). Idle time, not a whole transfer's time.
   * @default 60000
   */
  requestTimeoutMs?: number;
  /**
   * Send the output store's in-memory puts direct (direct-put.ts) once the SDK has shown the route:
   * an output's client only; a source's never puts.
   * @default false
   */
  directPuts?: boolean;
}

/** The sha256 (hex) of a request body the caller knows it of, by the body (a Buffer or a stream). */
const payloadHashes = new WeakMap<object, string>();

/**
 * Says that the body of the command made from `input` has this sha256 (hex), as computed while the
 * bytes were verified: the request carries it as `x-amz-content-sha256`, so the signer hashes
 * nothing again (on a plain-HTTP endpoint the SDK hashes every body it signs), and S3 refuses a
 * body that does not match it (`XAmzContentSHA256Mismatch`), a streamed one too. Keyed by the body
 * object, which the SDK passes on as it is (it copies the input). Returns `input`.
 */
export function withPayloadHash<T extends { Body?: unknown }>(input: T, sha256: string): T {
  if (typeof input.Body === 'object' && input.Body !== null && /^[0-9a-f]{64}$/.test(sha256)) {
    payloadHashes.set(input.Body, sha256);
  }
  return input;
}

/** How the client was configured, for messages; holds no secret. */
export interface S3AccessConfig {
  /**
   * The region from the environment; without one, the default, which the shared config's `region`
   * (of `AWS_PROFILE`) overrides when the first request resolves it.
   */
  region: string;
  regionSource: 'AWS_REGION' | 'AWS_DEFAULT_REGION' | 'shared config, else default';
  /** The custom endpoint, or null for AWS itself. */
  endpoint: string | null;
  endpointSource: 'AWS_ENDPOINT_URL_S3' | 'AWS_ENDPOINT_URL' | null;
  forcePathStyle: boolean;
  /** `WHEN_REQUIRED` with a custom endpoint (R2 and GCS refuse the SDK's default CRCs), else `WHEN_SUPPORTED`. */
  checksums: 'WHEN_REQUIRED' | 'WHEN_SUPPORTED';
  maxAttempts: number;
  /** Which link of the default chain the environment points at, before any credential is resolved. */
  credentialSource: string;
}

/** An S3 client and how it was configured. */
export interface S3Access {
  client: S3Client;
  config: S3AccessConfig;
  /** In-memory PutObjects without the SDK's middleware, on routes the client's own puts took (`directPuts`). */
  direct?: DirectPut;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off']);

function nonEmpty(value: string | undefined): string | undefined {
  const v = value?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** `KITCHEN_S3_FORCE_PATH_STYLE`, checked once here with a message that says what was expected. */
function pathStyleFlag(env: S3Env): boolean | undefined {
  const raw = nonEmpty(env.KITCHEN_S3_FORCE_PATH_STYLE);
  if (raw === undefined) return undefined;
  const v = raw.toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new UsageError(
    `KITCHEN_S3_FORCE_PATH_STYLE must be 1/true/yes/on or 0/false/no/off, got ${JSON.stringify(raw)}`,
  );
}

/**
 * The endpoint the SDK itself would take from the environment (it reads `AWS_ENDPOINT_URL_S3`, then
 * `AWS_ENDPOINT_URL`, unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is true). We read it too, to
 * decide path-style and checksums, and hand it to the SDK as `endpoint`: an explicit endpoint wins
 * over the SDK's configured-endpoint lookup, so it is applied once.
 */
function endpointFrom(env: S3Env): Pick<S3AccessConfig, 'endpoint' | 'endpointSource'> {
  const ignore = nonEmpty(env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS)?.toLowerCase();
  if (ignore === 'true') return { endpoint: null, endpointSource: null };
  for (const name of ['AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL'] as const) {
    const value = nonEmpty(env[name]);
    if (value === undefined) continue;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new UsageError(
        `${name} must be an http(s) URL such as http://127.0.0.1:9000, got ${JSON.stringify(value)}`,
      );
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new UsageError(`${name} must be an http(s) URL, got ${JSON.stringify(value)}`);
    }
    if (url.username !== '' || url.password !== '') {
      // Credentials belong to the SDK's chain, never to a URL that messages would show.
      throw new UsageError(`${name} must not hold a user name or password; use the AWS credential variables`);
    }
    return { endpoint: value, endpointSource: name };
  }
  return { endpoint: null, endpointSource: null };
}

/**
 * Which link of the SDK's default chain (credential-provider-node: environment, then SSO/shared
 * config/process for the profile, then web identity, then container, then instance metadata) the
 * environment selects. Names only variables and the profile, never a value that is a secret.
 */
export function credentialSourceFrom(env: S3Env): string {
  if (nonEmpty(env.AWS_ACCESS_KEY_ID) && nonEmpty(env.AWS_SECRET_ACCESS_KEY)) {
    const session = nonEmpty(env.AWS_SESSION_TOKEN) ? ' with AWS_SESSION_TOKEN' : '';
    return `environment (AWS_ACCESS_KEY_ID${session})`;
  }
  const profile = nonEmpty(env.AWS_PROFILE);
  if (profile !== undefined) return `shared config profile ${JSON.stringify(profile)} (AWS_PROFILE)`;
  if (nonEmpty(env.AWS_WEB_IDENTITY_TOKEN_FILE) && nonEmpty(env.AWS_ROLE_ARN)) {
    return `web identity (AWS_WEB_IDENTITY_TOKEN_FILE, role ${env.AWS_ROLE_ARN?.trim()})`;
  }
  if (
    nonEmpty(env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI) ||
    nonEmpty(env.AWS_CONTAINER_CREDENTIALS_FULL_URI)
  ) {
    return 'container credentials (AWS_CONTAINER_CREDENTIALS_*)';
  }
  return 'default chain (shared config profile "default", then instance metadata)';
}

function maxAttemptsOf(options: S3ClientOptions): number {
  const n = options.maxAttempts ?? 4;
  if (!Number.isInteger(n) || n < 1 || n > 20) {
    throw new UsageError(`S3 maxAttempts must be an integer from 1 to 20, got ${String(n)}`);
  }
  return n;
}

/**
 * Builds the run's S3 client from `env` (normally `process.env`). Throws a {@link UsageError} for a
 * malformed `KITCHEN_S3_FORCE_PATH_STYLE` or endpoint. The SDK's credential chain itself reads
 * `process.env` and the shared files when a request is first signed; nothing is resolved here.
 */
export function createS3Client(env: S3Env = process.env, options: S3ClientOptions = {}): S3Access {
  const { endpoint, endpointSource } = endpointFrom(env);
  const forcePathStyle = pathStyleFlag(env) ?? endpoint !== null;
  const checksums = endpoint === null ? 'WHEN_SUPPORTED' : 'WHEN_REQUIRED';
  const maxAttempts = maxAttemptsOf(options);
  const defaultRegion = options.defaultRegion ?? 'us-east-1';
  const requestTimeoutMs = options.requestTimeoutMs ?? 60_000;

  // The JS SDK reads AWS_REGION and the shared config's `region`, not AWS_DEFAULT_REGION (the CLI's
  // name, which many deployments set alone), and fails without a region: so both are read here,
  // and shared config is asked through the SDK's own loader.
  let region = nonEmpty(env.AWS_REGION);
  let regionSource: 'AWS_REGION' | 'AWS_DEFAULT_REGION' = 'AWS_REGION';
  if (region === undefined) {
    region = nonEmpty(env.AWS_DEFAULT_REGION);
    regionSource = 'AWS_DEFAULT_REGION';
  }
  const profile = nonEmpty(env.AWS_PROFILE);
  const regionProvider =
    region !== undefined
      ? region
      : async (): Promise<string> => {
          const fromFiles = await loadConfig(
            {
              ...NODE_REGION_CONFIG_OPTIONS,
              environmentVariableSelector: () => undefined,
              default: () => '',
            },
            { ...NODE_REGION_CONFIG_FILE_OPTIONS, ...(profile === undefined ? {} : { profile }) },
          )().catch(() => '');
          return fromFiles !== '' ? fromFiles : defaultRegion;
        };

  const client = new S3Client({
    region: regionProvider,
    // A bucket in another region answers 301/400 with its region; the SDK retries it there.
    followRegionRedirects: true,
    forcePathStyle,
    maxAttempts,
    retryMode: 'standard',
    // socketTimeout is the idle timeout that fails the attempt (requestTimeout only warns unless told to throw).
    requestHandler: { connectionTimeout: requestTimeoutMs, socketTimeout: requestTimeoutMs },
    requestChecksumCalculation: checksums,
    // Each command's middleware chain is resolved once, not per request (it was a tenth of the
    // client's CPU per result at 10^4 results). Holds for calls without per-call options.
    cacheMiddleware: true,
    responseChecksumValidation: checksums,
    ...(endpoint === null ? {} : { endpoint }),
  });
  // The known hash of withPayloadHash as the payload's header, before the signer would hash the body.
  client.middlewareStack.add(
    (next) => async (args) => {
      const body = (args.input as { Body?: unknown }).Body;
      const hash = typeof body === 'object' && body !== null ? payloadHashes.get(body) : undefined;
      const request = args.request as { headers?: Record<string, string> };
      if (hash !== undefined && request.headers) request.headers['x-amz-content-sha256'] = hash;
      return next(args);
    },
    { step: 'build', name: 'kitchenBatchKnownPayloadHash' },
  );
  return {
    client,
    ...(options.directPuts ? { direct: new DirectPut(client, { timeoutMs: requestTimeoutMs }) } : {}),
    config: {
      region: region ?? defaultRegion,
      regionSource: region === undefined ? 'shared config, else default' : regionSource,
      endpoint,
      endpointSource,
      forcePathStyle,
      checksums,
      maxAttempts,
      credentialSource: credentialSourceFrom(env),
    },
  };
}

/** Closes the client and its direct puts' connections. */
export function closeS3Access(access: S3Access): void {
  access.direct?.destroy();
  access.client.destroy();
}

// The SDK tags resolved credentials with the provider that made them (`$source`, feature ids).
const SOURCE_WORDS: Readonly<Record<string, string>> = {
  CREDENTIALS_ENV_VARS: 'environment variables',
  CREDENTIALS_ENV_VARS_STS_WEB_ID_TOKEN: 'web identity token file (environment)',
  CREDENTIALS_PROFILE: 'shared config profile',
  CREDENTIALS_PROFILE_SOURCE_PROFILE: 'shared config profile (assumed role)',
  CREDENTIALS_PROFILE_NAMED_PROVIDER: 'shared config profile (credential_source)',
  CREDENTIALS_PROFILE_STS_WEB_ID_TOKEN: 'shared config profile (web identity)',
  CREDENTIALS_PROFILE_SSO: 'shared config profile (SSO)',
  CREDENTIALS_PROFILE_SSO_LEGACY: 'shared config profile (SSO)',
  CREDENTIALS_PROFILE_PROCESS: 'shared config profile (credential_process)',
  CREDENTIALS_PROFILE_LOGIN: 'shared config profile (login)',
  CREDENTIALS_SSO: 'SSO',
  CREDENTIALS_SSO_LEGACY: 'SSO',
  CREDENTIALS_PROCESS: 'credential_process',
  CREDENTIALS_HTTP: 'container credentials endpoint',
  CREDENTIALS_IMDS: 'instance metadata (IMDS)',
  CREDENTIALS_CODE: 'credentials passed in code',
};

/**
 * The credential source the SDK actually used, resolved now (what issue 33's exit-2 message names):
 * e.g. `environment variables`, `shared config profile "ci" (AWS_PROFILE)`. Falls back to
 * {@link S3AccessConfig.credentialSource} when the chain finds nothing; never returns a key.
 */
export async function resolveCredentialSource(access: S3Access, env: S3Env = process.env): Promise<string> {
  let sources: string[];
  try {
    const credentials = (await access.client.config.credentials()) as { $source?: Record<string, unknown> };
    sources = Object.keys(credentials.$source ?? {}).map((id) => SOURCE_WORDS[id] ?? id);
  } catch {
    return `none found (${access.config.credentialSource})`;
  }
  if (sources.length === 0) return access.config.credentialSource;
  const profile = nonEmpty(env.AWS_PROFILE);
  const words = [...new Set(sources)].join(', ');
  return words.includes('profile') && profile !== undefined ? `${words} ${JSON.stringify(profile)}` : words;
}

/**
 * One line for logs and the exit-2 message: bucket, endpoint, region, addressing and credential
 * source. Holds no credential.
 */
export function describeS3Access(config: S3AccessConfig, bucket?: string): string {
  const parts = [
    bucket === undefined ? null : `bucket ${JSON.stringify(bucket)}`,
    config.endpoint === null ? 'AWS S3' : `endpoint ${config.endpoint} (${config.endpointSource})`,
    `region ${config.region} (${config.regionSource}; redirects followed)`,
    config.forcePathStyle ? 'path-style' : 'virtual-hosted',
    `checksums ${config.checksums}`,
    `${config.maxAttempts} attempts`,
    `credentials from ${config.credentialSource}`,
  ];
  return parts.filter((p) => p !== null).join(', ');
}
