/**
 * A PutObject of an in-memory body without the SDK's middleware stack (issue 33): one SigV4-signed
 * request on a keep-alive agent, for the output store's many small puts (a result, a thumbnail).
 * The SDK's stack costs about 0.3 ms of the main thread per request (endpoint rules, the retry
 * strategy, serialisers, a new signer and copies of the whole client config for each), a third of
 * a bucket run's extra CPU at 10^4 results; this path costs about 0.2 ms.
 *
 * The SDK still decides everything that needs knowing about S3: a bucket's route (scheme, host,
 * path, query, signing region and name) is learnt from a PutObject the SDK itself sent and got a
 * 2xx for (the run's probe, or its first put), and the request is signed with the SDK's signer
 * class, the client's credential provider (refreshed by the SDK), its hash and its clock offset.
 * The key material never leaves those objects.
 *
 * Anything but a plain answer goes back to the SDK: the caller sends the put through the SDK when
 * {@link DirectPut.put} returns `fallback` (a 5xx, a reset, a timeout, a redirect, a refusal), so
 * retries, region redirects, clock-skew correction and error messages stay the SDK's. A 412 to
 * `If-None-Match: *` is answered here (`exists`), as the SDK would have. A bucket whose direct puts
 * are refused (a 4xx other than 412) three times is left to the SDK for the rest of the run.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { S3Client } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';

/** One put: the body in memory, the headers a PutObject of ours can carry. */
export interface DirectPutRequest {
  bucket: string;
  /** The whole key, prefix included. */
  key: string;
  body: Buffer;
  /** The body's sha256 (hex) when known (a verified result): sent as the signed payload hash. */
  sha256?: string;
  contentType?: string;
  metadata?: Readonly<Record<string, string>>;
  ifNoneMatch?: '*';
  ifMatch?: string;
}

/** What a direct put came to. */
export type DirectPutAnswer =
  | { kind: 'stored' }
  /** 412 to `If-None-Match: *`: the key is taken (the caller asks what it holds). */
  | { kind: 'exists'; status: 412 }
  /** Not sent, or not plainly answered: the caller sends it through the SDK. */
  | { kind: 'fallback'; reason: string };

/** A bucket's route, as the SDK sent a PutObject there. */
interface Route {
  protocol: 'http:' | 'https:';
  hostname: string;
  port?: number;
  /** The path before the encoded key: `/bucket/` (path-style) or `/` (virtual-hosted). */
  base: string;
  query: Record<string, string>;
  signer: SignatureV4;
}

/** Refusals of a bucket's direct puts after which the bucket is left to the SDK. */
const REFUSALS_ALLOWED = 3;
/** Sockets of the agent, as the SDK's own agent has. */
const MAX_SOCKETS = 50;

/** What of the SDK's resolved client config the signer needs (public, documented fields). */
interface SignerConfig {
  credentials: ConstructorParameters<typeof SignatureV4>[0]['credentials'];
  sha256: ConstructorParameters<typeof SignatureV4>[0]['sha256'];
  signingEscapePath?: boolean;
  systemClockOffset?: number;
  region: () => Promise<string>;
}

/** Direct PutObjects for one S3 client; {@link DirectPut.learn} is its middleware. */
export class DirectPut {
  readonly #config: SignerConfig;
  readonly #timeoutMs: number;
  readonly #routes = new Map<string, Route>();
  readonly #refusals = new Map<string, number>();
  readonly #agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
  };

  constructor(client: S3Client, options: { timeoutMs: number }) {
    this.#config = client.config as unknown as SignerConfig;
    this.#timeoutMs = options.timeoutMs;
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const out = await next(args);
        await this.#learn(context, args.input, args.request, out.response);
        return out;
      },
      { step: 'build', name: 'kitchenBatchDirectPutRoute' },
    );
  }

  /** Whether puts to `bucket` can go direct now (a route is known and not given up). */
  knows(bucket: string): boolean {
    return this.#routes.has(bucket);
  }

  /** Sends the put, or says why not (`fallback`): never throws. */
  async put(request: DirectPutRequest): Promise<DirectPutAnswer> {
    const route = this.#routes.get(request.bucket);
    if (route === undefined) return { kind: 'fallback', reason: 'no route learnt' };
    try {
      const status = await this.#send(route, request);
      if (status >= 200 && status < 300) return { kind: 'stored' };
      if (status === 412 && request.ifNoneMatch === '*') return { kind: 'exists', status };
      if (status >= 400 && status < 500 && status !== 409) this.#refused(request.bucket);
      return { kind: 'fallback', reason: `HTTP ${status}` };
    } catch (error) {
      return { kind: 'fallback', reason: (error as NodeJS.ErrnoException).code ?? 'network error' };
    }
  }

  /** Closes the agents' idle sockets. */
  destroy(): void {
    this.#agents['http:'].destroy();
    this.#agents['https:'].destroy();
  }

  /** Signs and sends the put; resolves to the answer's status. */
  async #send(route: Route, request: DirectPutRequest): Promise<number> {
    const { body } = request;
    const path = route.base + encodeKey(request.key);
    const host = route.port === undefined ? route.hostname : `${route.hostname}:${route.port}`;
    const headers: Record<string, string> = {
      host,
      'content-length': String(body.length),
      'x-amz-content-sha256': request.sha256 ?? createHash('sha256').update(body).digest('hex'),
    };
    if (request.contentType !== undefined) headers['content-type'] = request.contentType;
    for (const [name, value] of Object.entries(request.metadata ?? {})) headers[`x-amz-meta-${name}`] = value;
    if (request.ifNoneMatch !== undefined) headers['if-none-match'] = request.ifNoneMatch;
    if (request.ifMatch !== undefined) headers['if-match'] = request.ifMatch;
    const signed = await route.signer.sign(
      {
        method: 'PUT',
        protocol: route.protocol,
        hostname: route.hostname,
        ...(route.port === undefined ? {} : { port: route.port }),
        path,
        query: route.query,
        headers,
      },
      { signingDate: new Date(Date.now() + (this.#config.systemClockOffset ?? 0)) },
    );
    const search = new URLSearchParams(route.query).toString();
    return new Promise((resolve, reject) => {
      const req = (route.protocol === 'https:' ? https : http).request(
        {
          agent: this.#agents[route.protocol],
          method: 'PUT',
          hostname: route.hostname,
          ...(route.port === undefined ? {} : { port: route.port }),
          path: search === '' ? path : `${path}?${search}`,
          headers: signed.headers,
          timeout: this.#timeoutMs,
        },
        (res) => {
          // The answer's body (empty, or an XML error) is read and dropped: the SDK's retry says it.
          res.on('error', reject);
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.resume();
        },
      );
      req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
      req.on('error', reject);
      req.end(body);
    });
  }

  #refused(bucket: string): void {
    const n = (this.#refusals.get(bucket) ?? 0) + 1;
    this.#refusals.set(bucket, n);
    this.#routes.delete(bucket);
  }

  /** The middleware's part: records the route of a PutObject the SDK sent, once it got a 2xx. */
  async #learn(
    context: { commandName?: string; endpointV2?: { properties?: { authSchemes?: unknown[] } } },
    input: object,
    request: unknown,
    response: unknown,
  ): Promise<void> {
    if (context.commandName !== 'PutObjectCommand') return;
    const { Bucket, Key } = input as { Bucket?: string; Key?: string };
    const status = (response as { statusCode?: number } | undefined)?.statusCode;
    if (typeof Bucket !== 'string' || typeof Key !== 'string' || status === undefined || status >= 300)
      return;
    if ((this.#refusals.get(Bucket) ?? 0) >= REFUSALS_ALLOWED || this.#routes.has(Bucket)) return;
    const route = await this.#routeOf(request, Key, context.endpointV2?.properties?.authSchemes?.[0]);
    if (route !== null) this.#routes.set(Bucket, route);
  }

  /** The route of `request` (the SDK's, built for `key`), or null when it is not one we can repeat. */
  async #routeOf(request: unknown, key: string, authScheme: unknown): Promise<Route | null> {
    const r = request as {
      protocol?: string;
      hostname?: string;
      port?: number;
      path?: string;
      query?: Record<string, unknown>;
    };
    if ((r.protocol !== 'http:' && r.protocol !== 'https:') || !r.hostname || typeof r.path !== 'string') {
      return null;
    }
    const encoded = encodeKey(key);
    if (!r.path.endsWith(encoded) || !r.path.slice(0, -encoded.length).endsWith('/')) return null;
    // PutObject's query is the constant `x-id=PutObject`; anything else we would not know to repeat.
    const query: Record<string, string> = {};
    for (const [name, value] of Object.entries(r.query ?? {})) {
      if (name !== 'x-id' || typeof value !== 'string') return null;
      query[name] = value;
    }
    const scheme = (authScheme ?? { name: 'sigv4' }) as {
      name?: string;
      signingName?: string;
      signingRegion?: string;
    };
    if (scheme.name !== 'sigv4') return null;
    const config = this.#config;
    return {
      protocol: r.protocol,
      hostname: r.hostname,
      ...(r.port === undefined ? {} : { port: r.port }),
      base: r.path.slice(0, -encoded.length),
      query,
      signer: new SignatureV4({
        credentials: config.credentials,
        sha256: config.sha256,
        service: scheme.signingName ?? 's3',
        region: scheme.signingRegion ?? (await config.region()),
        uriEscapePath: config.signingEscapePath ?? false,
      }),
    };
  }
}

/** A key as a PutObject's path: each segment percent-encoded as the SDK does (RFC 3986, `!'()*` too). */
export function encodeKey(key: string): string {
  return key
    .split('/')
    .map((segment) =>
      encodeURIComponent(segment).replace(
        /[!'()*]/g,
        (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
      ),
    )
    .join('/');
}
