/**
 * Outputs in object storage (issue 33): the same catalogue run by the built CLI with a local `--out`
 * and with `--out s3://` on a loopback S3 server, compared in this one run: throughput (target ≥
 * 0.8× the local run), peak RSS (≤ local + 50 MB), and the S3 requests per item by kind (journal
 * segments, results, thumbnails, reports, the rest), the state's PUTs per item (target ≤ 0.2).
 * Then the finished S3 run again from an empty cache: 0 job requests, 0 result uploads or
 * downloads, its wall time.
 *
 * The server runs in this process, on the two cores it measures: fauxqs, in memory, with the
 * conditional front of test/support/s3-conditional.ts as hooks of its own server (one HTTP hop).
 * `BENCH_S3OUT_SERVER=s3rver` takes s3rver on disk behind the front, which forwards over HTTP:
 * about four times the CPU per PUT, taken from the CLI.
 *
 * Size: `BENCH_S3OUT_IMAGES` (default 1,700 images × 6 styles = 10,200 items).
 * Server: `BENCH_S3OUT_SERVER` (`fauxqs`, the default, or `s3rver`).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startConditionalS3 } from '../test/support/s3-conditional.js';
import { buildDist, type CliFigures, CONCURRENCY, measureCli, startEmulator } from './cli-run.js';
import { fmt, printTable, tempDir, verdict, writeKitchens } from './util.js';

const STYLES = ['scandinavian', 'industrial', 'japandi', 'farmhouse', 'modern', 'coastal'];
const BUCKET = 'bench-out';
const S3_ENV = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

/** The kind of an S3 request, by its key under the run's prefix. */
function kindOf(key: string): string {
  if (key.includes('/.kitchen-batch/journal/')) return 'state';
  if (key.includes('/.kitchen-batch/')) return 'lease/probe/log';
  if (key.includes('/results/')) return 'results';
  if (key.includes('/thumbs/')) return 'thumbs';
  return 'reports/plan';
}

/** Prints the s3-out section. */
export async function benchS3Out(): Promise<unknown> {
  const images = Number(process.env.BENCH_S3OUT_IMAGES ?? 1700);
  if (!Number.isInteger(images) || images < 1) throw new Error('BENCH_S3OUT_IMAGES: a whole number ≥ 1');
  const items = images * STYLES.length;
  buildDist();
  const { dir, cleanup } = await tempDir('kb-bench-s3out-');
  const backend = process.env.BENCH_S3OUT_SERVER ?? 'fauxqs';
  if (backend !== 'fauxqs' && backend !== 's3rver') throw new Error('BENCH_S3OUT_SERVER: fauxqs or s3rver');
  const s3 = await startConditionalS3([BUCKET], { backend });
  const emulator = await startEmulator(items * 5 + 1000);
  try {
    const imgDir = path.join(dir, 'img');
    await mkdir(imgDir);
    const drawn = await writeKitchens(imgDir, images, { width: 480, height: 360, grain: 16, seed: 33 });
    const manifest = path.join(dir, 'catalogue.csv');
    const rows = drawn.files.map((file) => `img/${path.basename(file)},${STYLES.join('|')}`);
    await writeFile(manifest, `image,style\n${rows.join('\n')}\n`);
    const env = { ...S3_ENV, AWS_ENDPOINT_URL_S3: s3.endpoint };
    console.log(
      `${items.toLocaleString('en-US')} items (${images} images × ${STYLES.length} styles), concurrency ${CONCURRENCY}, ` +
        `--no-review; emulator: instant jobs; S3: ${backend} ${backend === 'fauxqs' ? 'with' : 'behind'} the conditional front on 127.0.0.1`,
    );
    const warmUp = await measureCli(dir, manifest, path.join(dir, 'out-warm-up'), emulator, ['--no-review']);
    console.log(`  warm-up (renders the results once): ${fmt(warmUp.wallS)} s, exit ${warmUp.exitCode}`);

    const local = await measureCli(dir, manifest, path.join(dir, 'out-local'), emulator, ['--no-review']);
    const url = `s3://${BUCKET}/nightly/`;
    const cache = path.join(dir, 'cache-1');
    const mark = s3.requests.length;
    // This process runs the S3 server (the backend and the front): its CPU during the run is the server's.
    const serverCpu = process.cpuUsage();
    const remote = await measureCli(dir, manifest, url, emulator, ['--no-review', '--cache', cache], {
      env,
      logDir: cache,
    });
    const { user, system } = process.cpuUsage(serverCpu);
    const serverCpuS = (user + system) / 1e6;
    const seen = s3.requests.slice(mark);
    const byKind = new Map<string, Map<string, number>>();
    for (const r of seen) {
      const kind = kindOf(r.key);
      const methods = byKind.get(kind) ?? new Map<string, number>();
      methods.set(r.method, (methods.get(r.method) ?? 0) + 1);
      byKind.set(kind, methods);
    }
    const rerunMark = s3.requests.length;
    const cache2 = path.join(dir, 'cache-2');
    const rerun = await measureCli(dir, manifest, url, emulator, ['--no-review', '--cache', cache2], {
      env,
      logDir: cache2,
    });
    const rerunSeen = s3.requests.slice(rerunMark);
    const resultTraffic = rerunSeen.filter(
      (r) => kindOf(r.key) === 'results' && (r.method === 'PUT' || r.method === 'GET'),
    ).length;

    const row = (name: string, r: CliFigures) => [
      name,
      String(r.exitCode),
      `${r.succeeded}/${items}`,
      fmt(r.wallS),
      fmt(items / r.wallS, 0),
      fmt(r.peakRssMb, 0),
      r.liveHeapMb === null ? '-' : fmt(r.liveHeapMb, 0),
      fmt(r.cpuS, 1),
      r.tailS === null ? '-' : fmt(r.tailS, 1),
      fmt(r.emulatorCpuS, 1),
      `${r.requests.creates}/${r.requests.polls}`,
    ];
    // The CLI's CPU seconds tell its own cost from the S3 server's (which runs in this process); the
    // tail is the time from the last download to the exit (reports, thumbnails, the state's last commit).
    printTable(
      [
        '--out',
        'exit',
        'succeeded',
        'wall s',
        'items/s',
        'peak RSS MB',
        'live heap MB',
        'CLI CPU s',
        'tail s',
        'emulator CPU s',
        'POST/polls',
      ],
      [row('local folder', local), row('s3:// (loopback)', remote), row('s3://, rerun, empty cache', rerun)],
    );
    printTable(
      ['S3 requests of the run', 'by method', 'per item'],
      [...byKind].map(([kind, methods]) => {
        const total = [...methods.values()].reduce((a, b) => a + b, 0);
        return [kind, [...methods].map(([m, n]) => `${m} ${n}`).join(', '), fmt(total / items, 3)];
      }),
    );
    const statePuts = byKind.get('state')?.get('PUT') ?? 0;
    const ratio = local.wallS / remote.wallS;
    const targets: Array<[string, string, boolean]> = [
      ['s3://: throughput ≥ 0.8× the local run', `${fmt(ratio, 2)}×`, ratio >= 0.8],
      [
        's3://: peak RSS ≤ local + 50 MB',
        `${fmt(remote.peakRssMb - local.peakRssMb, 0)} MB`,
        remote.peakRssMb <= local.peakRssMb + 50,
      ],
      ["the state's PUTs per item ≤ 0.2", fmt(statePuts / items, 3), statePuts / items <= 0.2],
      [
        'rerun from an empty cache: 0 job requests',
        String(rerun.requests.creates + rerun.requests.polls),
        rerun.requests.creates + rerun.requests.polls === 0,
      ],
      ['rerun: 0 result uploads or downloads', String(resultTraffic), resultTraffic === 0],
      [
        'every run succeeds whole',
        [local, remote, rerun].map((r) => r.succeeded).join('/'),
        [local, remote, rerun].every((r) => r.succeeded === items && r.exitCode === 0),
      ],
    ];
    printTable(
      ['target', 'figure', 'verdict'],
      targets.map(([name, figure, ok]) => [name, figure, verdict(ok)]),
    );
    console.log(
      `  S3 server (${backend} + front, in this process) CPU during the s3:// run: ${fmt(serverCpuS)} s ` +
        `for ${seen.length} requests, beside the CLI's ${fmt(remote.cpuS)} s, on 2 cores`,
    );
    console.log(`  rerun from an empty cache: ${fmt(rerun.wallS)} s, ${rerunSeen.length} S3 requests`);
    return {
      items,
      local: { wall_s: local.wallS, peak_rss_mb: local.peakRssMb },
      s3: {
        wall_s: remote.wallS,
        peak_rss_mb: remote.peakRssMb,
        cli_cpu_s: remote.cpuS,
        server_cpu_s: serverCpuS,
      },
      rerun: { wall_s: rerun.wallS, s3_requests: rerunSeen.length, result_traffic: resultTraffic },
      requests: Object.fromEntries([...byKind].map(([k, m]) => [k, Object.fromEntries(m)])),
      targets: targets.map(([name, figure, ok]) => ({ name, figure, ok })),
    };
  } finally {
    emulator.stop();
    await s3.close();
    await cleanup();
  }
}
