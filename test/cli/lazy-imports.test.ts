/**
 * Issue 30: a run loads only the code it uses. The CLI runs as a child process with a preload
 * (test/support/module-log.mjs) that writes every module it resolves. A local sandbox run into a
 * local folder must load neither the AWS SDK, nor prom-client, nor the worker mode's BullMQ and
 * ioredis, nor playwright; and each is shown loaded when it is used (so the assertions can fail):
 * the SDK by `--out s3://`, prom-client by `--metrics-file` and `--metrics-port`. Commands that
 * only read: `report --no-html` loads neither sharp, nor got, nor pino (report.html loads sharp to make
 * thumbnails, not to keep those made); `plan` without a service loads no got (with `--sandbox` it
 * does). The rerun of a finished run decodes nothing, so it loads no sharp.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import module from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, killAllClis, REPO_ROOT, runCli } from '../helpers/cli.js';
import { useTempDir } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';
import { type ConditionalS3, startConditionalS3 } from '../support/s3-conditional.js';

const HOOK = path.join(REPO_ROOT, 'test', 'support', 'module-log.mjs');
/** The packages only a bucket needs. */
const S3_PACKAGES = ['@aws-sdk/', '@smithy/'];
/** What exported or served metrics need. */
const METRICS_PACKAGES = ['prom-client'];
/** What only the worker mode (enqueue, worker, status, report --redis) and the browser tests need. */
const OTHER_PACKAGES = ['bullmq', 'ioredis', 'playwright'];
const ALL_PACKAGES = [...S3_PACKAGES, ...METRICS_PACKAGES, ...OTHER_PACKAGES];
const BUCKET = 'kb-lazy';

/** The packages a module log names (`@scope/name` or `name`), from the URLs under node_modules. */
function packagesOf(log: string): Set<string> {
  const names = new Set<string>();
  for (const url of log.split('\n')) {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (match) names.add(match[1]!);
  }
  return names;
}

/** The loaded packages whose names start with one of `prefixes`. */
function loadedOf(packages: Set<string>, prefixes: readonly string[]): string[] {
  return [...packages].filter((name) => prefixes.some((prefix) => name.startsWith(prefix))).sort();
}

// Node.js before 22.15 has no synchronous module hooks to see `require()` and `import()` with.
const hooks = typeof (module as { registerHooks?: unknown }).registerHooks === 'function';

// Concurrent: each test's CLIs write into folders of their own, and most of their time is the
// sandbox's job time. So the CLIs are stopped after the file, not after each test (another test's
// CLI would be killed mid-run).
describe.skipIf(!hooks)(
  'what a run loads (issue 30; skipped without module.registerHooks)',
  { concurrent: true },
  () => {
    const tmp = useTempDir('kb-lazy-', 'suite');
    let logNo = 0;
    afterAll(killAllClis);
    beforeAll(async () => {
      await tmp.write('images/k1.jpg', await kitchenJpeg(1, 160, 120));
      await tmp.write('manifest.csv', 'id,image,module,style\nk1,images/k1.jpg,change-style,modern\n');
    });

    /** The CLI with `args` in the test's folder, and the packages it loaded. */
    async function cli(
      args: string[],
      env: Record<string, string> = {},
    ): Promise<{ result: CliResult; packages: Set<string>; log: string }> {
      const file = tmp.file(`modules-${++logNo}.log`);
      const result = await runCli(args, {
        cwd: tmp.dir,
        env: { ...env, MODULE_LOG_FILE: file, NODE_OPTIONS: `--import ${HOOK}` },
      });
      const log = await readFile(file, 'utf8');
      return { result, packages: packagesOf(log), log };
    }

    /** `run manifest.csv --sandbox ...more`. */
    const run = (more: string[], env: Record<string, string> = {}) =>
      cli(['run', 'manifest.csv', '--sandbox', '--no-progress', '--json', ...more], env);

    it.each([['--version'], ['--help']])(
      '%s loads no command: no image library, HTTP client, logger or manifest parser',
      async (flag) => {
        const { result, packages, log } = await cli([flag]);
        expect(result.code, result.stderr).toBe(0);
        // The log sees the CLI's own modules.
        expect(log).toMatch(/\/cli\.(js|ts)$/m);
        expect(loadedOf(packages, [...ALL_PACKAGES, 'sharp', 'got', 'pino', 'csv-parse'])).toEqual([]);
      },
    );

    it('report --no-html reads a journal with no image library, HTTP client or logger; report.html loads sharp only to make thumbs', async () => {
      const out = tmp.file('out-report');
      expect((await run(['--out', out])).result.code).toBe(0);
      const bare = await cli(['report', out, '--no-html', '--json']);
      expect(bare.result.code, bare.result.stderr).toBe(0);
      expect(bare.packages.size).toBeGreaterThan(0);
      expect(loadedOf(bare.packages, [...ALL_PACKAGES, 'sharp', 'got', 'pino'])).toEqual([]);
      // The run made the page's thumbs: kept as they are, nothing decoded.
      const again = await cli(['report', out, '--json']);
      expect(again.result.code, again.result.stderr).toBe(0);
      expect(loadedOf(again.packages, ['sharp', 'got', 'pino'])).toEqual([]);
      // Thumbs to make do load sharp (so the assertions above can fail).
      await rm(path.join(out, 'thumbs'), { recursive: true });
      const page = await cli(['report', out, '--json']);
      expect(page.result.code, page.result.stderr).toBe(0);
      expect(loadedOf(page.packages, ['sharp', 'got', 'pino'])).toEqual(['sharp']);
      expect((await readdir(path.join(out, 'thumbs'))).length).toBeGreaterThan(0);
    });

    it('the rerun of a finished run decodes nothing: no sharp', async () => {
      const out = tmp.file('out-rerun');
      const first = await run(['--out', out]);
      expect(first.result.code, first.result.stderr).toBe(0);
      expect(first.packages).toContain('sharp');
      const rerun = await run(['--out', out]);
      expect(rerun.result.code, rerun.result.stderr).toBe(0);
      expect(JSON.parse(rerun.result.stdout).totals.succeeded).toBe(1);
      expect(loadedOf(rerun.packages, ['sharp', ...ALL_PACKAGES])).toEqual([]);
    });

    it('plan without a service loads no HTTP client or logger; with --sandbox it loads the client', async () => {
      const alone = await cli(['plan', 'manifest.csv', '--out', tmp.file('out-plan'), '--json']);
      expect(alone.result.code, alone.result.stderr).toBe(0);
      // The preflight decodes the images.
      expect(alone.packages).toContain('sharp');
      expect(loadedOf(alone.packages, [...ALL_PACKAGES, 'got', 'pino'])).toEqual([]);
      const asked = await cli(['plan', 'manifest.csv', '--out', tmp.file('out-plan'), '--json', '--sandbox']);
      expect(asked.result.code, asked.result.stderr).toBe(0);
      expect(loadedOf(asked.packages, [...ALL_PACKAGES, 'got'])).toEqual(['got']);
    });

    it('a local run into a local folder loads no AWS SDK, no prom-client, no BullMQ, ioredis or playwright', async () => {
      const { result, packages } = await run(['--out', tmp.file('out-local')]);
      expect(result.code, result.stderr).toBe(0);
      // The log sees the packages a run does use.
      expect(packages).toContain('sharp');
      expect(loadedOf(packages, ALL_PACKAGES)).toEqual([]);
    });

    it.each([
      ['--metrics-file', () => ['--metrics-file', tmp.file('run.prom')]],
      ['--metrics-port', () => ['--metrics-port', '0']],
    ])('%s loads prom-client (and still no AWS SDK or BullMQ)', async (flag, flags) => {
      const { result, packages } = await run(['--out', tmp.file(`out${flag}`), ...flags()]);
      expect(result.code, result.stderr).toBe(0);
      expect(loadedOf(packages, METRICS_PACKAGES)).toEqual(['prom-client']);
      expect(loadedOf(packages, [...S3_PACKAGES, ...OTHER_PACKAGES])).toEqual([]);
    });

    it('--ping-url alone needs no metrics: prom-client is not loaded, and both pings go', async () => {
      const seen: string[] = [];
      const server: Server = createServer((req, res) => {
        seen.push(req.url ?? '');
        res.end('OK');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = server.address() as { port: number };
        const ping = `http://127.0.0.1:${port}/ping`;
        const { result, packages } = await run(['--out', tmp.file('out-ping'), '--ping-url', ping]);
        expect(result.code, result.stderr).toBe(0);
        expect(seen).toEqual(['/ping/start', '/ping/0']);
        expect(loadedOf(packages, ALL_PACKAGES)).toEqual([]);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    describe('into a bucket', () => {
      let s3: ConditionalS3;
      beforeAll(async () => {
        s3 = await startConditionalS3([BUCKET]);
      });
      afterAll(async () => {
        await s3?.close();
      });

      it('run --out s3:// loads the AWS SDK', async () => {
        const { result, packages } = await run(
          ['--out', `s3://${BUCKET}/run/`, '--cache', tmp.file('cache')],
          {
            AWS_ACCESS_KEY_ID: 'S3RVER',
            AWS_SECRET_ACCESS_KEY: 'S3RVER',
            AWS_REGION: 'us-east-1',
            AWS_ENDPOINT_URL_S3: s3.endpoint,
          },
        );
        expect(result.code, result.stderr).toBe(0);
        expect(packages).toContain('@aws-sdk/client-s3');
        expect(loadedOf(packages, [...METRICS_PACKAGES, ...OTHER_PACKAGES])).toEqual([]);
      });
    });
  },
);
