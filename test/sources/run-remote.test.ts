/**
 * Issue 32 end to end: a `run` whose images are https/http URLs and S3 objects, through the CLI as
 * a user runs it, against a real source server and a real S3-compatible server on 127.0.0.1. Each
 * source fault ends as the contract says; each distinct source is fetched once; the server never
 * sees the API key or an Authorization header; no signature shows in any output but the journal;
 * the rerun of the finished run downloads no source body and sends no job request.
 */
import { readFile, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createS3Client } from '../../src/storage/s3/client.js';
import type { Report } from '../../src/types.js';
import { closeWorkspaces, workspace } from '../helpers/batch.js';
import { runCli } from '../helpers/cli.js';
import { jobRequests } from '../helpers/sandbox.js';
import { allFiles } from '../helpers/tmp.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';
import { FAKE_KEY_ID, FAKE_SECRET, putObjects, startFauxqsServer } from '../support/s3-servers.js';

afterEach(async () => {
  vi.unstubAllEnvs();
  await closeWorkspaces();
});

const SIGNATURE = 'c1gnatureSECRET0123456789abcdef';
const CREDENTIAL = 'AKIASIGNEDCREDENTIAL7';
const LAST_MODIFIED = 'Wed, 25 Nov 2026 10:00:00 GMT';

/** A route serving `body` with an ETag and Last-Modified, answering 304 to a matching If-None-Match. */
function image(body: Buffer, etag: string) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, { ETag: etag }).end();
      return;
    }
    res
      .writeHead(200, {
        'Content-Type': 'image/jpeg',
        'Content-Length': body.length,
        ETag: etag,
        'Last-Modified': LAST_MODIFIED,
      })
      .end(body);
  };
}

/** `run` of `manifest` against the workspace's sandbox and folder, private sources allowed. */
function runArgs(
  ws: { sandbox: { url: string }; out: string },
  manifest: string,
  ...extra: string[]
): string[] {
  return [
    'run',
    manifest,
    '--base-url',
    ws.sandbox.url,
    '--out',
    ws.out,
    '--allow-private-sources',
    '--no-progress',
    ...extra,
  ];
}

/** What a report says of each item: `status` or `status/code`. */
function outcomes(report: Report): Record<string, string> {
  return Object.fromEntries(
    report.items.map((item) => [item.id, item.error ? `${item.status}/${item.error.code}` : item.status]),
  );
}

describe('remote sources, end to end (real source server, real S3 server, the CLI)', () => {
  it('http(s) sources: every fault as the contract says, each source fetched once, no secret anywhere, a rerun downloads nothing', async () => {
    const ws = await workspace({ items: 0 });
    const server = await new SourceServer().start();
    try {
      const [k1, signed, flaky] = await Promise.all([1, 2, 3].map((seed) => kitchenJpeg(seed, 320, 240)));
      server.routes.set('/img/k1.jpg', image(k1!, '"k1-v1"'));
      server.routes.set('/img/signed.jpg', image(signed!, '"signed-v1"'));
      server.routes.set('/img/flaky.jpg', (req, res, hit) => {
        if (hit === 1) res.writeHead(503, { 'Retry-After': '0' }).end('busy');
        else image(flaky!, '"flaky-v1"')(req, res);
      });
      server.routes.set('/img/forbidden.jpg', (_req, res) => res.writeHead(403).end('no'));
      server.routes.set('/img/page.jpg', (_req, res) =>
        res.writeHead(200, { 'Content-Type': 'text/html' }).end('<html><body>Sign in</body></html>'),
      );
      server.routes.set('/img/metadata.jpg', (_req, res) =>
        res.writeHead(302, { Location: 'http://169.254.169.254/latest/meta-data/' }).end(),
      );
      server.routes.set('/img/big.jpg', (_req, res) => {
        // Over the cap, and without a Content-Length: refused while it streams.
        res.writeHead(200, { 'Content-Type': 'image/jpeg' });
        res.end(Buffer.concat([k1!, Buffer.alloc(300 * 1024, 7)]));
      });
      server.routes.set('/img/down.jpg', (_req, res) => res.writeHead(503, { 'Retry-After': '0' }).end());
      const signedUrl = `${server.url('/img/signed.jpg')}?X-Amz-Credential=${CREDENTIAL}%2F20261126%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=900&X-Amz-Signature=${SIGNATURE}`;
      const rows = [
        `,${server.url('/img/k1.jpg')},change-style,scandinavian|industrial,,`,
        `,${signedUrl},change-style,japandi,,`,
        `,${server.url('/img/flaky.jpg')},change-style,modern,,`,
        `,${server.url('/img/missing.jpg')},change-style,modern,,`,
        `,${server.url('/img/forbidden.jpg')},change-style,modern,,`,
        `,${server.url('/img/page.jpg')},change-style,modern,,`,
        `,${server.url('/img/metadata.jpg')},change-style,modern,,`,
        `,${server.url('/img/big.jpg')},change-style,modern,,`,
        `,${server.url('/img/down.jpg')},change-style,modern,,`,
      ];
      const manifest = path.join(ws.dir, 'remote.csv');
      await writeFile(manifest, `id,image,module,style,prompt,configuration\n${rows.join('\n')}\n`);
      const args = runArgs(ws, manifest, '--max-source-bytes', '100K');
      const env = { KITCHEN_API_KEY: ws.apiKey };
      const first = await runCli(args, { cwd: ws.dir, env });
      expect(first.code, first.stderr).toBe(1);
      const report = JSON.parse(await readFile(path.join(ws.out, 'report.json'), 'utf8')) as Report;
      expect(outcomes(report)).toEqual({
        k1__scandinavian: 'succeeded',
        k1__industrial: 'succeeded',
        signed__japandi: 'succeeded',
        flaky__modern: 'succeeded',
        missing__modern: 'rejected/file_not_found',
        forbidden__modern: 'rejected/source_forbidden',
        page__modern: 'rejected/unsupported_format',
        metadata__modern: 'rejected/source_blocked',
        big__modern: 'rejected/too_large',
        down__modern: 'incomplete/source_unavailable',
      });
      const blocked = report.items.find((item) => item.id === 'metadata__modern');
      expect(blocked?.error?.message).toMatch(/169\.254\.169\.254/);
      // One GET for the two styles of k1; the flaky source twice (503, then 200).
      expect(server.seen('/img/k1.jpg')).toHaveLength(1);
      expect(server.seen('/img/flaky.jpg')).toHaveLength(2);
      // The source server never sees credentials of any kind.
      for (const request of server.requests) {
        expect(request.headers.authorization).toBeUndefined();
        expect(JSON.stringify(request.headers)).not.toContain(ws.apiKey);
      }
      // The signature is in the journal (a rerun needs the URL whole) and nowhere else.
      const files = await allFiles(ws.out);
      const journal = files.find((file) => path.basename(file) === 'journal.jsonl');
      expect(await readFile(journal!, 'utf8')).toContain(SIGNATURE);
      const report_ = await readFile(path.join(ws.out, 'report.json'), 'utf8');
      expect(report_).toContain('X-Amz-Signature=***');
      for (const file of files.filter((f) => f !== journal && !/\.(jpe?g|png|webp)$/.test(f))) {
        const text = await readFile(file, 'latin1');
        expect(text.includes(SIGNATURE), file).toBe(false);
        expect(text.includes(CREDENTIAL), file).toBe(false);
        expect(text.includes(ws.apiKey), file).toBe(false);
      }
      for (const text of [first.stdout, first.stderr]) {
        expect(text.includes(SIGNATURE)).toBe(false);
        expect(text.includes(CREDENTIAL)).toBe(false);
      }

      // The rerun: conditional requests answered 304, no body, no job request; `down` is tried again.
      const seenBefore = server.requests.length;
      const jobsBefore = ws.sandbox.stats.requests.length;
      const again = await runCli(args, { cwd: ws.dir, env });
      expect(again.code, again.stderr).toBe(1);
      const rerun = server.requests.slice(seenBefore);
      const k1Again = rerun.filter((r) => r.url.startsWith('/img/k1.jpg'));
      expect(k1Again.length).toBeLessThanOrEqual(1);
      for (const r of k1Again) expect(r.headers['if-none-match']).toBe('"k1-v1"');
      expect(rerun.filter((r) => r.url.startsWith('/img/down.jpg')).length).toBeGreaterThan(0);
      expect(jobRequests(ws.sandbox, jobsBefore)).toBe(0);
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('S3 sources: a glob listed and matched, a missing key rejected, credentials in no output', async () => {
    const ws = await workspace({ items: 0 });
    const s3 = await startFauxqsServer(['kitchen-photos']);
    try {
      const env = {
        AWS_ENDPOINT_URL_S3: s3.endpoint,
        AWS_ACCESS_KEY_ID: FAKE_KEY_ID,
        AWS_SECRET_ACCESS_KEY: FAKE_SECRET,
        AWS_REGION: 'us-east-1',
      };
      // The SDK's credential chain reads this process's environment (the child gets `env`).
      vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
      vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
      const { client } = createS3Client(env);
      await putObjects(client, 'kitchen-photos', {
        'kitchens/a.jpg': await kitchenJpeg(4, 320, 240),
        'kitchens/b.jpg': await kitchenJpeg(5, 320, 240),
        'kitchens/notes.txt': 'not an image',
        'other/c.jpg': await kitchenJpeg(6, 320, 240),
      });
      client.destroy();
      const manifest = path.join(ws.dir, 's3.csv');
      const rows = [
        'image,style',
        's3://kitchen-photos/kitchens/*.jpg,modern|japandi',
        's3://kitchen-photos/other/c.jpg,modern',
        's3://kitchen-photos/other/none.jpg,modern',
      ];
      await writeFile(manifest, `${rows.join('\n')}\n`);
      const result = await runCli(runArgs(ws, manifest), {
        cwd: ws.dir,
        env: { KITCHEN_API_KEY: ws.apiKey, ...env },
      });
      expect(result.code, result.stderr).toBe(1);
      const report = JSON.parse(await readFile(path.join(ws.out, 'report.json'), 'utf8')) as Report;
      expect(outcomes(report)).toEqual({
        a__modern: 'succeeded',
        a__japandi: 'succeeded',
        b__modern: 'succeeded',
        b__japandi: 'succeeded',
        c__modern: 'succeeded',
        none__modern: 'rejected/file_not_found',
      });
      expect(report.items.find((i) => i.id === 'a__modern')?.image).toBe(
        's3://kitchen-photos/kitchens/a.jpg',
      );
      for (const file of await allFiles(ws.out)) {
        const text = await readFile(file, 'latin1');
        expect(text.includes(FAKE_SECRET), file).toBe(false);
      }
      for (const text of [result.stdout, result.stderr]) expect(text.includes(FAKE_SECRET)).toBe(false);
    } finally {
      await s3.close();
    }
  }, 120_000);
});
