/**
 * Remote sources (issue 32): the same catalogue read from local files, from an http server on
 * loopback and from an S3-compatible server on loopback, each run by the built CLI as a child
 * process against the emulator (bench/cli-run.ts), and compared in this one run: throughput against
 * the local run (target ≥ 0.8×), peak RSS (target ≤ the local run's + 50 MB), and the peak disk of
 * the run's `.prepared/` folder while it runs (bounded by what is in flight, not by the catalogue).
 * Then the URL run again on its finished output: no source body downloaded (conditional requests
 * answered 304), no job request.
 *
 * Both servers run in this process, so they cost the client nothing it is measured for. Size:
 * `BENCH_SOURCES_IMAGES` (default 1,700 images × 6 styles = 10,200 items).
 */
import { createHash } from 'node:crypto';
import { type Dirent, readdirSync, statSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { createS3Client } from '../src/storage/s3/client.js';
import { startFauxqsServer } from '../test/support/s3-servers.js';
import { buildDist, type CliFigures, CONCURRENCY, measureCli, startEmulator } from './cli-run.js';
import { fmt, printTable, tempDir, verdict, writeKitchens } from './util.js';

const STYLES = ['scandinavian', 'industrial', 'japandi', 'farmhouse', 'modern', 'coastal'];
const BUCKET = 'bench-sources';
/** The fetcher's own concurrency (preflight's `sourceConcurrency` default). */
const SOURCE_CONCURRENCY = 16;
const S3_ENV = {
  AWS_ENDPOINT_URL_S3: '',
  AWS_ACCESS_KEY_ID: 'AKIABENCHKEY00000001',
  AWS_SECRET_ACCESS_KEY: 'benchSECRETbenchSECRETbenchSECRET0000000',
  AWS_REGION: 'us-east-1',
};

/** An http server of the images on 127.0.0.1, with validators and 304s, counting what it sent. */
async function startImageServer(files: ReadonlyMap<string, Buffer>) {
  const stats = { bodies: 0, notModified: 0, bytes: 0, other: 0 };
  const lastModified = new Date(Date.now() - 3_600_000).toUTCString();
  const etags = new Map([...files].map(([name, data]) => [name, `"${hash(data).slice(0, 16)}"`]));
  const server = http.createServer((req, res) => {
    const name = decodeURIComponent((req.url ?? '/').split('?')[0]!.slice('/img/'.length));
    const data = files.get(name);
    const etag = etags.get(name);
    if (!data || !etag || req.method !== 'GET') {
      stats.other++;
      res.writeHead(404).end();
      return;
    }
    if (req.headers['if-none-match'] === etag) {
      stats.notModified++;
      res.writeHead(304, { ETag: etag }).end();
      return;
    }
    stats.bodies++;
    stats.bytes += data.length;
    res
      .writeHead(200, {
        'Content-Type': 'image/jpeg',
        'Content-Length': data.length,
        ETag: etag,
        'Last-Modified': lastModified,
      })
      .end(data);
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stats,
    reset: () => Object.assign(stats, { bodies: 0, notModified: 0, bytes: 0, other: 0 }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function hash(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The byte size of the files under `dir`, its subfolders included (0 when it is not there). */
function folderBytes(dir: string): number {
  let sum = 0;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    try {
      sum += entry.isDirectory() ? folderBytes(full) : statSync(full).size;
    } catch {}
  }
  return sum;
}

/** Samples {@link folderBytes} every 100 ms; `stop` gives the peak and the last size. */
function sampleFolder(dir: string): { stop(): { peak: number; last: number } } {
  let peak = 0;
  let last = 0;
  const read = () => {
    last = folderBytes(dir);
    peak = Math.max(peak, last);
  };
  const timer = setInterval(read, 100);
  return {
    stop() {
      clearInterval(timer);
      read();
      return { peak, last };
    },
  };
}

/** One CSV manifest: a row per image with the six styles; `ref` makes each image's reference. */
async function writeManifest(file: string, names: readonly string[], ref: (name: string) => string) {
  const rows = names.map((name) => `${ref(name)},${STYLES.join('|')}`);
  await writeFile(file, `image,style\n${rows.join('\n')}\n`);
}

/** Prints the sources section. */
export async function benchSources(): Promise<unknown> {
  const images = Number(process.env.BENCH_SOURCES_IMAGES ?? 1700);
  if (!Number.isInteger(images) || images < 1) throw new Error('BENCH_SOURCES_IMAGES: a whole number ≥ 1');
  const items = images * STYLES.length;
  buildDist();
  const { dir, cleanup } = await tempDir('kb-bench-sources-');
  const s3 = await startFauxqsServer([BUCKET]);
  const emulator = await startEmulator(items * 5 + 1000);
  let server: Awaited<ReturnType<typeof startImageServer>> | undefined;
  try {
    const imgDir = path.join(dir, 'img');
    await mkdir(imgDir);
    const drawn = await writeKitchens(imgDir, images, { width: 480, height: 360, grain: 16, seed: 32 });
    const names = drawn.files.map((file) => path.basename(file));
    const bodies = new Map(
      await Promise.all(names.map(async (n) => [n, await readFile(path.join(imgDir, n))] as const)),
    );
    const largest = Math.max(...[...bodies.values()].map((b) => b.length));
    server = await startImageServer(bodies);
    const { url: serverUrl } = server;
    const env = { ...S3_ENV, AWS_ENDPOINT_URL_S3: s3.endpoint };
    // The SDK's credential chain reads this process's environment; the CLI gets `env`.
    process.env.AWS_ACCESS_KEY_ID = S3_ENV.AWS_ACCESS_KEY_ID;
    process.env.AWS_SECRET_ACCESS_KEY = S3_ENV.AWS_SECRET_ACCESS_KEY;
    const { client } = createS3Client(env);
    for (const [name, body] of bodies) {
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `img/${name}`, Body: body }));
    }
    client.destroy();
    const manifests = {
      local: path.join(dir, 'local.csv'),
      url: path.join(dir, 'url.csv'),
      s3: path.join(dir, 's3.csv'),
    };
    await writeManifest(manifests.local, names, (n) => `img/${n}`);
    await writeManifest(manifests.url, names, (n) => `${serverUrl}/img/${n}`);
    await writeManifest(manifests.s3, names, (n) => `s3://${BUCKET}/img/${n}`);
    console.log(
      `${items.toLocaleString('en-US')} items (${images} distinct images of ~${fmt(drawn.meanBytes / 1024, 0)} KiB × ${STYLES.length} styles), ` +
        `concurrency ${CONCURRENCY}, --no-review; emulator: instant jobs, results rendered in a warm-up run; ` +
        `sources: local files, http://127.0.0.1 (ETag, 304s), S3 (fauxqs) on 127.0.0.1`,
    );
    const remote = ['--allow-private-sources'];
    const warmUp = await measureCli(dir, manifests.local, path.join(dir, 'out-warm-up'), emulator, [
      '--no-review',
    ]);
    console.log(`  warm-up (renders the results once): ${fmt(warmUp.wallS)} s, exit ${warmUp.exitCode}`);

    const run = async (name: keyof typeof manifests, out: string, extra: string[] = []) => {
      const prepared = sampleFolder(path.join(out, '.prepared'));
      const figures = await measureCli(dir, manifests[name], out, emulator, ['--no-review', ...extra], {
        env,
      });
      return { figures, prepared: prepared.stop() };
    };
    const local = await run('local', path.join(dir, 'out-local'));
    server.reset();
    const url = await run('url', path.join(dir, 'out-url'), remote);
    const urlServed = { ...server.stats };
    const fromS3 = await run('s3', path.join(dir, 'out-s3'), remote);
    server.reset();
    const rerun = await run('url', path.join(dir, 'out-url'), remote);
    const rerunServed = { ...server.stats };

    const row = (name: string, r: { figures: CliFigures; prepared: { peak: number; last: number } }) => [
      name,
      String(r.figures.exitCode),
      `${r.figures.succeeded}/${items}`,
      fmt(r.figures.wallS),
      fmt(items / r.figures.wallS, 0),
      fmt(r.figures.peakRssMb, 0),
      fmt(r.prepared.peak / 1024 / 1024, 1),
      fmt(r.prepared.last / 1024 / 1024, 1),
      `${r.figures.requests.creates}/${r.figures.requests.polls}`,
    ];
    printTable(
      [
        'sources',
        'exit',
        'succeeded',
        'wall s',
        'items/s',
        'peak RSS MB',
        '.prepared peak MB',
        '.prepared end MB',
        'POST/polls',
      ],
      [
        row('local files', local),
        row('http (loopback)', url),
        row('S3 (loopback)', fromS3),
        row('http, rerun', rerun),
      ],
    );
    console.log(
      `  http server: ${urlServed.bodies} bodies (${fmt(urlServed.bytes / 1024 / 1024, 1)} MB), ${urlServed.notModified} 304s in the run; ` +
        `${rerunServed.bodies} bodies and ${rerunServed.notModified} 304s in the rerun`,
    );
    const ratio = (r: typeof local) => local.figures.wallS / r.figures.wallS;
    const inFlightBound = (CONCURRENCY + SOURCE_CONCURRENCY) * largest * 2;
    const targets: Array<[string, string, boolean]> = [
      ['http: throughput ≥ 0.8× the local run', `${fmt(ratio(url), 2)}×`, ratio(url) >= 0.8],
      ['S3: throughput ≥ 0.8× the local run', `${fmt(ratio(fromS3), 2)}×`, ratio(fromS3) >= 0.8],
      [
        'http: peak RSS ≤ local + 50 MB',
        `${fmt(url.figures.peakRssMb - local.figures.peakRssMb, 0)} MB`,
        url.figures.peakRssMb <= local.figures.peakRssMb + 50,
      ],
      [
        'S3: peak RSS ≤ local + 50 MB',
        `${fmt(fromS3.figures.peakRssMb - local.figures.peakRssMb, 0)} MB`,
        fromS3.figures.peakRssMb <= local.figures.peakRssMb + 50,
      ],
      [
        `.prepared peak ≤ (${CONCURRENCY} jobs + ${SOURCE_CONCURRENCY} fetches) × 2 × the largest image (${fmt(inFlightBound / 1024 / 1024, 1)} MB)`,
        `${fmt(Math.max(url.prepared.peak, fromS3.prepared.peak) / 1024 / 1024, 1)} MB`,
        Math.max(url.prepared.peak, fromS3.prepared.peak) <= inFlightBound,
      ],
      [
        'every source fetched once (http bodies = images)',
        String(urlServed.bodies),
        urlServed.bodies === images,
      ],
      ['rerun of the http run: 0 source bodies', String(rerunServed.bodies), rerunServed.bodies === 0],
      [
        'rerun of the http run: 0 job requests',
        String(rerun.figures.requests.creates + rerun.figures.requests.polls),
        rerun.figures.requests.creates + rerun.figures.requests.polls === 0,
      ],
      [
        'every run succeeds whole',
        [local, url, fromS3].map((r) => r.figures.succeeded).join('/'),
        [local, url, fromS3].every((r) => r.figures.succeeded === items && r.figures.exitCode === 0),
      ],
    ];
    printTable(
      ['target', 'figure', 'verdict'],
      targets.map(([name, figure, ok]) => [name, figure, verdict(ok)]),
    );
    const figures = (r: typeof local) => ({
      wall_s: r.figures.wallS,
      peak_rss_mb: r.figures.peakRssMb,
      prepared_peak_bytes: r.prepared.peak,
      exit: r.figures.exitCode,
    });
    return {
      items,
      local: figures(local),
      http: figures(url),
      s3: figures(fromS3),
      rerun: { ...figures(rerun), bodies: rerunServed.bodies, not_modified: rerunServed.notModified },
      targets: targets.map(([name, figure, ok]) => ({ name, figure, ok })),
    };
  } finally {
    await server?.close();
    emulator.stop();
    await s3.close();
    await cleanup();
  }
}
