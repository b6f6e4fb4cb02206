/**
 * The key goes to the service as `Authorization: Bearer <key>` and nowhere else: never to the result
 * URL (same origin or redirected), never across a redirect away from the service, never into an
 * error a caller might print (docs/contract.md#rules, docs/faults.md D.23 and I.42).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ApiError } from '../../src/api/errors.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenImage } from '../support/images.js';
import { API_KEY, apiError, client, sandbox, styleInput, waitDone } from './helpers.js';

let jpeg: Buffer;

beforeAll(async () => {
  jpeg = await kitchenImage({ width: 240, height: 180 });
});

/** Every header of every request a plain node:http server received, and what it answers. */
interface Recorder {
  url: string;
  seen: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders }>;
  close(): Promise<void>;
}

async function recorder(
  answer: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): Promise<Recorder> {
  const seen: Recorder['seen'] = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', headers: { ...req.headers } });
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url, seen, close };
}

/** A downloaded-and-succeeded job on a fresh sandbox. */
async function succeeded() {
  const sb = await sandbox();
  const c = client(sb.url);
  const job = await waitDone(c, (await c.createJob(styleInput(jpeg))).id);
  return { sb, c, url: job.imageUrl ?? '' };
}

describe('Authorization header', () => {
  it('is sent as Bearer <key> with Accept: application/json on every /v1 request', async () => {
    const rec = await recorder((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ styles: ['modern'] }));
    });
    try {
      await client(rec.url).listStyles();
      expect(rec.seen).toHaveLength(1);
      expect(rec.seen[0]?.path).toBe('/v1/styles');
      expect(rec.seen[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(rec.seen[0]?.headers.accept).toBe('application/json');
    } finally {
      await rec.close();
    }

    // Against the sandbox, which answers 401 to any other key: create, poll and styles all passed.
    const { sb } = await succeeded();
    const service = sb.stats.requests.filter((r) => r.path.startsWith('/v1/'));
    expect(service.map((r) => r.method)).toContain('POST');
    expect(service.every((r) => r.hasAuthorization && r.status === (r.method === 'POST' ? 202 : 200))).toBe(
      true,
    );
  });

  it('is never sent to the result URL, although it lies on the service’s own origin', async () => {
    const { sb, c, url } = await succeeded();
    expect(new URL(url).origin).toBe(sb.url);
    await c.downloadResult(url, (await tempDirForTest()).file('r.part'));
    expect(sb.stats.storageRequests).toHaveLength(1);
    for (const r of sb.stats.storageRequests) expect(r.headers.authorization).toBeUndefined();
    expect(
      sb.stats.requests.filter((r) => r.path.startsWith('/storage/')).map((r) => r.hasAuthorization),
    ).toEqual([false]);
    expect(JSON.stringify(sb.stats.storageRequests)).not.toContain(API_KEY);
  });

  it('is never sent to the result URL nor to the origin it redirects to', async () => {
    const { sb, c, url } = await succeeded();
    sb.setFaults({ resultFault: 'redirect-cross-origin' });
    await c.downloadResult(url, (await tempDirForTest()).file('r.part'));
    expect(sb.stats.storageRequests.map((r) => r.origin)).toEqual(['primary', 'secondary']);
    for (const r of sb.stats.storageRequests) expect(r.headers.authorization).toBeUndefined();
    expect(JSON.stringify(sb.stats.storageRequests)).not.toContain(API_KEY);
  });

  it('is not sent even for a result URL under the service’s /v1 path', async () => {
    const png = await kitchenImage({ width: 20, height: 20, format: 'png' });
    const rec = await recorder((_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end(png);
    });
    try {
      const file = await client(rec.url).downloadResult(
        `${rec.url}/v1/results/r.png`,
        (await tempDirForTest()).file('r'),
      );
      expect(file.format).toBe('png');
      expect(rec.seen.map((s) => s.headers.authorization)).toEqual([undefined]);
      expect(JSON.stringify(rec.seen)).not.toContain(API_KEY);
    } finally {
      await rec.close();
    }
  });

  it('is dropped when the service redirects a request to another origin', async () => {
    const elsewhere = await recorder((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(['modern']));
    });
    const service = await recorder((req, res) => {
      res.writeHead(302, { location: `${elsewhere.url}${req.url}` });
      res.end();
    });
    try {
      expect((await client(service.url).listStyles())?.map((s) => s.key)).toEqual(['modern']);
      expect(service.seen[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(elsewhere.seen).toHaveLength(1);
      expect(elsewhere.seen[0]?.headers.authorization).toBeUndefined();
      expect(JSON.stringify(elsewhere.seen)).not.toContain(API_KEY);
    } finally {
      await service.close();
      await elsewhere.close();
    }
  });
});

describe('the key in errors', () => {
  /** Every way a caller might print an error: message, stack, JSON, and util.inspect with its causes. */
  function printed(error: ApiError): string {
    return [error.message, String(error.stack), JSON.stringify(error), inspect(error, { depth: 10 })].join(
      '\n',
    );
  }

  it('appears in no printed form of a transport, timeout, HTTP or protocol error', async () => {
    const sb = await sandbox();
    const c = client(sb.url, { requestTimeoutMs: 300, uploadTimeoutMs: 300 });
    const errors: ApiError[] = [];
    sb.setFaults({ resetRate: 1 });
    errors.push(await apiError(c.createJob(styleInput(jpeg))));
    errors.push(await apiError(c.getJob('job_x')));
    sb.setFaults({ resetRate: 0, hangRate: 1 });
    errors.push(await apiError(c.createJob(styleInput(jpeg))));
    errors.push(await apiError(c.getJob('job_x')));
    sb.setFaults({ hangRate: 0, rate429: 1 });
    errors.push(await apiError(c.getJob('job_x')));
    sb.setFaults({ rate429: 0 });
    const job = await c.createJob(styleInput(jpeg));
    sb.setFaults({ malformedRate: 1 });
    errors.push(await apiError(c.getJob(job.id)));
    await sb.close();
    errors.push(await apiError(c.createJob(styleInput(jpeg))));

    expect(errors.map((e) => e.kind)).toEqual([
      'network',
      'network',
      'timeout',
      'timeout',
      'http',
      'protocol',
      'network',
    ]);
    for (const error of errors) {
      const text = printed(error);
      expect(text).not.toContain(API_KEY);
      expect(text.toLowerCase()).not.toContain('bearer');
    }
    // The low-level cause survives for diagnosis.
    expect(inspect(errors[0])).toContain('ECONNRESET');
    expect(inspect(errors[2])).toContain("Timeout awaiting 'request' for 300ms");
  });
});
