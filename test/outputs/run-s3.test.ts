/**
 * Issue 33 end to end: `run --out s3://bucket/prefix/` through the CLI, against the sandbox and a
 * real S3 server (s3rver behind the conditional front of test/support/s3-conditional.ts, which
 * enforces If-None-Match / If-Match on PutObject as AWS does). Runs are killed -9 at several points
 * and rerun from another working folder with an empty cache: every item succeeds, no job with a
 * stored job id is posted again, no stored result is uploaded or downloaded again, and the API key
 * and the AWS secret are in no object and no output.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Sandbox } from '../../src/sandbox/index.js';
import type { JournalRecord } from '../../src/state/records.js';
import { journalPrefix, parseJournalName, segmentKey } from '../../src/state/remote/keys.js';
import { createS3Client } from '../../src/storage/s3/client.js';
import type { Report } from '../../src/types.js';
import { type CliProcess, type CliResult, killAllClis, runCli, waitFor } from '../helpers/cli.js';
import { removeDir, tempDir } from '../helpers/tmp.js';
import { createsPerItem, type Fixture, makeFixture, run, sandboxFor, startRun } from '../resume/world.js';
import { type ConditionalS3, startConditionalS3 } from '../support/s3-conditional.js';

const BUCKET = 'kb-out';
/** s3rver knows one key pair; its secret must show nowhere but in the SDK's signatures. */
const S3_ENV = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

let fixture: Fixture;
let s3: ConditionalS3;
let client: S3Client;
let prefixNo = 0;

beforeAll(async () => {
  fixture = await makeFixture(8, { name: 'nightly' });
  s3 = await startConditionalS3([BUCKET]);
  vi.stubEnv('AWS_ACCESS_KEY_ID', S3_ENV.AWS_ACCESS_KEY_ID);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', S3_ENV.AWS_SECRET_ACCESS_KEY);
  client = createS3Client({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' }).client;
});
afterEach(killAllClis);
afterAll(async () => {
  vi.unstubAllEnvs();
  client?.destroy();
  await s3?.close();
  if (fixture) await removeDir(fixture.dir);
});

/** A fresh prefix, a fresh cache folder and a fresh working folder: another machine. */
async function machine(prefix: string): Promise<{ out: string; cache: string; cwd: string }> {
  const { dir } = await tempDir('kb-s3out-');
  const cwd = path.join(dir, 'work');
  await mkdir(cwd, { recursive: true });
  return { out: `s3://${BUCKET}/${prefix}/`, cache: path.join(dir, 'cache'), cwd };
}

const env = () => ({ ...S3_ENV, AWS_ENDPOINT_URL_S3: s3.endpoint });

function startOn(sandbox: Sandbox, m: { out: string; cache: string; cwd: string }): CliProcess {
  return startRun(fixture, sandbox, m.out, ['--cache', m.cache], { cwd: m.cwd, env: env() });
}

function runOn(sandbox: Sandbox, m: { out: string; cache: string; cwd: string }): Promise<CliResult> {
  return run(fixture, sandbox, m.out, ['--cache', m.cache, '--json'], { cwd: m.cwd, env: env() });
}

async function keys(prefix: string): Promise<string[]> {
  const out: string[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) out.push(o.Key!);
    token = page.NextContinuationToken;
  } while (token);
  return out.sort();
}

async function text(key: string): Promise<string> {
  return (await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body!.transformToString();
}

/** The journal records stored under `prefix` (snapshot and segments, in order). */
async function storedRecords(prefix: string): Promise<JournalRecord[]> {
  const all = (await keys(`${prefix}/.kitchen-batch/journal/`)).map((k) => path.posix.basename(k));
  const snapshots = all.filter((n) => n.startsWith('snapshot-')).sort();
  const last = snapshots.at(-1);
  const covered = last ? Number(last.slice('snapshot-'.length, -'.jsonl'.length)) : 0;
  const names = [
    ...(last ? [last] : []),
    ...all.filter((n) => /^\d+\.jsonl$/.test(n) && Number(n.slice(0, -6)) > covered).sort(),
  ];
  const records: JournalRecord[] = [];
  for (const name of names) {
    for (const line of (await text(`${prefix}/.kitchen-batch/journal/${name}`)).split('\n')) {
      if (line.trim()) records.push(JSON.parse(line) as JournalRecord);
    }
  }
  return records;
}

function frontRequests(prefix: string, method: string, sub: string): number {
  return s3.requests.filter((r) => r.method === method && r.key.startsWith(`${BUCKET}/${prefix}/${sub}`))
    .length;
}

describe('run --out s3:// (real S3 server with conditional writes, the CLI)', () => {
  it('a whole run: results once with their sha256, reports and plan in the bucket; the rerun from another machine sends nothing', async () => {
    const sandbox = await sandboxFor(fixture, { processingMs: 100, jitterMs: 50 });
    try {
      const m = await machine('whole');
      const first = await runOn(sandbox, m);
      expect(first.code, first.stderr).toBe(0);
      const stored = await keys('whole/');
      const results = stored.filter((k) => k.startsWith('whole/results/'));
      expect(results).toHaveLength(fixture.items.length);
      for (const name of ['report.json', 'report.csv', 'report.html', 'plan.jsonl']) {
        expect(stored).toContain(`whole/${name}`);
      }
      const report = JSON.parse(await text('whole/report.json')) as Report;
      expect(report.run.totals.succeeded).toBe(fixture.items.length);
      const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: results[0]! }));
      const item = report.items.find((i) => `whole/${i.output}` === results[0]);
      expect(head.Metadata?.sha256).toBe(item?.sha256);
      expect(head.ContentType).toMatch(/^image\//);

      const before = { posts: sandbox.stats.creates, puts: frontRequests('whole', 'PUT', 'results/') };
      const again = await runOn(sandbox, await machine('whole'));
      expect(again.code, again.stderr).toBe(0);
      expect(sandbox.stats.creates).toBe(before.posts);
      expect(frontRequests('whole', 'PUT', 'results/')).toBe(before.puts);
      expect(frontRequests('whole', 'GET', 'results/')).toBe(0);
      for (const secret of [fixture.apiKey, S3_ENV.AWS_SECRET_ACCESS_KEY]) {
        for (const key of await keys('whole/')) expect((await text(key)).includes(secret), key).toBe(false);
        expect(first.stdout + first.stderr + again.stdout + again.stderr).not.toContain(secret);
      }
      for (const r of s3.requests) expect(JSON.stringify(r.headers)).not.toContain(fixture.apiKey);

      // plan, report and review of the bucket run, from yet another machine with an empty cache.
      const elsewhere = await machine('whole');
      const planned = await runCli(
        ['plan', fixture.manifest, '--out', m.out, '--cache', elsewhere.cache, '--json'],
        {
          cwd: elsewhere.cwd,
          env: env(),
        },
      );
      expect(planned.code, planned.stderr).toBe(0);
      expect(JSON.parse(planned.stdout).summary).toMatchObject({ submit: 0 });
      const rebuilt = await runCli(['report', m.out, '--cache', elsewhere.cache, '--json'], {
        cwd: elsewhere.cwd,
        env: env(),
      });
      expect(rebuilt.code, rebuilt.stderr).toBe(0);
      expect(JSON.parse(rebuilt.stdout)).toMatchObject({ totals: { succeeded: fixture.items.length } });
      const reviewed = await runCli(['review', m.out, '--cache', elsewhere.cache], {
        cwd: elsewhere.cwd,
        env: env(),
      });
      expect(reviewed.code, reviewed.stderr).toBe(0);
      expect(reviewed.stderr).toMatch(new RegExp(`reviewed ${fixture.items.length} results`));
      const records = await storedRecords('whole');
      expect(records.filter((r) => r.t === 'reviewed').length).toBeGreaterThanOrEqual(
        2 * fixture.items.length,
      );
    } finally {
      await sandbox.close();
    }
  }, 120_000);

  const KILL_POINTS: { name: string; when: (sandbox: Sandbox, prefix: string) => boolean }[] = [
    { name: 'after a submitting segment', when: (sandbox) => sandbox.stats.creates >= 1 },
    { name: 'after a 202', when: (sandbox) => sandbox.stats.jobs >= 3 },
    { name: 'mid result upload', when: (_s, prefix) => frontRequests(prefix, 'PUT', 'results/') >= 1 },
    { name: 'mid report write', when: (_s, prefix) => frontRequests(prefix, 'PUT', 'report.json') >= 1 },
  ];

  for (const point of KILL_POINTS) {
    it(`killed -9 ${point.name}, rerun elsewhere with an empty cache: all succeed, nothing paid or stored twice`, async () => {
      const sandbox = await sandboxFor(fixture, { processingMs: 300, jitterMs: 200 });
      const prefix = `kill-${++prefixNo}`;
      try {
        const first = startOn(sandbox, await machine(prefix));
        await waitFor(() => point.when(sandbox, prefix) || first.exitedYet(), { timeoutMs: 30_000 });
        first.kill('SIGKILL');
        await first.exited;
        const journal = await storedRecords(prefix);
        const accepted = new Set(journal.filter((r) => r.t === 'accepted').map((r) => r.id));
        const storedResults = new Set(await keys(`${prefix}/results/`));
        const mark = s3.requests.length;

        const rerun = await runOn(sandbox, await machine(prefix));
        expect(rerun.code, rerun.stderr).toBe(0);
        const report = JSON.parse(await text(`${prefix}/report.json`)) as Report;
        expect(report.run.totals.succeeded).toBe(fixture.items.length);
        const creates = await createsPerItem(fixture, sandbox);
        for (const id of accepted) expect(creates.get(id), `${id} was accepted before the kill`).toBe(1);
        const after = s3.requests.slice(mark);
        // A result stored but not yet journaled when the kill came is put again and refused (412,
        // same sha256: counted as stored); none is overwritten or read back.
        const again = after.filter(
          (r) =>
            storedResults.has(r.key.slice(BUCKET.length + 1)) &&
            (r.method === 'GET' || (r.method === 'PUT' && r.status !== 412)),
        );
        expect(
          again.map((r) => `${r.method} ${r.key} ${r.status}`),
          'a stored result written or read again',
        ).toEqual([]);
      } finally {
        await sandbox.close();
      }
    });
  }

  it('killed -9 with two journal segments in flight, the later one stored: the rerun leaves it out, deletes it and writes its number again', async () => {
    // 40 items: the governor sends one request at a time until 32 were accepted (a submission holds
    // that one slot while its mark is stored), so the hold comes once requests overlap.
    const wide = await makeFixture(40, { name: 'wide' });
    const sandbox = await sandboxFor(wide, { processingMs: 300, jitterMs: 100 });
    const prefix = `kill-${++prefixNo}`;
    const journalAt = journalPrefix(`${prefix}/`);
    const segment = (n: number) => segmentKey(`${prefix}/`, n);
    const numberOf = (key: string) => parseJournalName(path.posix.basename(key))?.seq ?? Number.NaN;
    try {
      const m = await machine(prefix);
      const first = startRun(wide, sandbox, m.out, ['--cache', m.cache], { cwd: m.cwd, env: env() });
      // With jobs being paid for, the next segment's PUT is held on its way; the jobs already
      // running go on (their polls wait for no segment) and their records go out in the one after.
      await waitFor(() => sandbox.stats.creates >= 24 || first.exitedYet(), { timeoutMs: 30_000 });
      s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${journalAt}`, times: 1, hold: true });
      await waitFor(() => s3.held().length === 1 || first.exitedYet(), { timeoutMs: 30_000 });
      const held = numberOf(s3.held()[0] ?? '');
      await waitFor(
        () =>
          s3.requests.some(
            (r) => r.method === 'PUT' && r.key === `${BUCKET}/${segment(held + 1)}` && r.status === 200,
          ) || first.exitedYet(),
        { timeoutMs: 30_000 },
      );
      first.kill('SIGKILL');
      await first.exited;
      await waitFor(() => s3.held().length === 0, { timeoutMs: 5000 });
      const before = await keys(journalAt);
      expect(before.at(-1)).toBe(segment(held + 1));
      expect(before).not.toContain(segment(held));
      // Only the segments before the held one counted: what the run could have relied on.
      const counted: JournalRecord[] = [];
      for (const key of before.slice(0, -1)) {
        for (const line of (await text(key)).split('\n')) if (line.trim()) counted.push(JSON.parse(line));
      }
      const accepted = new Set(counted.filter((r) => r.t === 'accepted').map((r) => r.id));
      expect(accepted.size).toBeGreaterThan(0);
      const storedResults = new Set(await keys(`${prefix}/results/`));
      const mark = s3.requests.length;

      const elsewhere = await machine(prefix);
      const rerun = await run(wide, sandbox, elsewhere.out, ['--cache', elsewhere.cache, '--json'], {
        cwd: elsewhere.cwd,
        env: env(),
      });
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(rerun.stderr).toContain(
        `left out s3://${BUCKET}/${segment(held + 1)}: stored without the segment before it`,
      );
      const numbers = (await keys(journalAt))
        .map((k) => parseJournalName(path.posix.basename(k)))
        .filter((j) => j?.kind === 'segment')
        .map((j) => j!.seq);
      expect(numbers).toEqual(numbers.map((_, i) => i + 1));
      expect(numbers.length).toBeGreaterThan(held);
      const report = JSON.parse(await text(`${prefix}/report.json`)) as Report;
      expect(report.run.totals.succeeded).toBe(wide.items.length);
      const creates = await createsPerItem(wide, sandbox);
      for (const id of accepted) expect(creates.get(id), `${id} was accepted in a counted segment`).toBe(1);
      // A job whose id was only in the lost segments is sent again and counted as a possible duplicate.
      for (const item of report.items) {
        expect(item.ambiguous_resends, item.id).toBe((creates.get(item.id) ?? 0) - 1);
      }
      // A result whose `reviewed` record was only in the lost segments is reviewed again, which
      // reads its bytes (the cache is empty); any other stored result is neither read nor written.
      const reviewed = new Set(counted.filter((r) => r.t === 'reviewed').map((r) => r.id));
      const idOf = (key: string) => path.posix.basename(key).replace(/\.[^.]+$/, '');
      const again = s3.requests
        .slice(mark)
        .filter(
          (r) =>
            storedResults.has(r.key.slice(BUCKET.length + 1)) &&
            ((r.method === 'GET' && reviewed.has(idOf(r.key))) || (r.method === 'PUT' && r.status !== 412)),
        );
      expect(again.map((r) => `${r.method} ${r.key} ${r.status}`)).toEqual([]);
    } finally {
      s3.heal();
      s3.release();
      await sandbox.close();
      await removeDir(wide.dir);
    }
  }, 90_000);

  it('two runs on one prefix: one holds the lease, the other exits 2; the lease of a killed holder is taken over', async () => {
    const sandbox = await sandboxFor(fixture, { processingMs: 1500, jitterMs: 100 });
    try {
      const prefix = 'leased';
      const first = startOn(sandbox, await machine(prefix));
      await waitFor(() => sandbox.stats.creates >= 1 || first.exitedYet(), { timeoutMs: 30_000 });
      const second = await runOn(sandbox, await machine(prefix));
      expect(second.code).toBe(2);
      expect(second.stderr).toMatch(/in use by another kitchen-batch run \(pid \d+/);
      expect(second.stderr).toContain(`s3://${BUCKET}/${prefix}`);
      first.kill('SIGKILL');
      await first.exited;
      // The holder ran on this host and is gone: its lease is stale at once (a holder elsewhere: after 60 s).
      const third = await runOn(sandbox, await machine(prefix));
      expect(third.code, third.stderr).toBe(0);
      expect(third.stderr).toMatch(
        /took over the lease of a run that is gone \(pid \d+ .*\): its process is gone/,
      );
    } finally {
      await sandbox.close();
    }
  });

  it('a bucket that refuses the results (503 after the retries): no new submission, exit 1 with output_unavailable; a rerun finishes', async () => {
    const sandbox = await sandboxFor(fixture, { processingMs: 200, jitterMs: 50 });
    try {
      const prefix = 'down';
      s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${prefix}/results/`, times: 1_000, status: 503 });
      const first = await runOn(sandbox, await machine(prefix));
      expect(first.code, first.stderr).toBe(1);
      expect(first.stderr).toMatch(/no new submissions: the output store could not be written/);
      const report = JSON.parse(await text(`${prefix}/report.json`)) as Report;
      const codes = new Set(report.items.map((i) => i.error?.code));
      expect([...codes]).toEqual(['output_unavailable']);
      // Items reached after the halt say so (with 8 items, all may have been sent before it).
      const unsent = report.items.filter((i) => i.error?.message.startsWith('not submitted:'));
      expect(unsent.length).toBe(fixture.items.length - sandbox.stats.creates);
      s3.heal();
      const rerun = await runOn(sandbox, await machine(prefix));
      expect(rerun.code, rerun.stderr).toBe(0);
      expect((JSON.parse(await text(`${prefix}/report.json`)) as Report).run.totals.succeeded).toBe(
        fixture.items.length,
      );
    } finally {
      await sandbox.close();
    }
  });

  it('a bucket that does not exist, or refused credentials: exit 2 before any submission, naming the bucket', async () => {
    const sandbox = await sandboxFor(fixture);
    try {
      const m = await machine('x');
      const missing = await run(fixture, sandbox, 's3://no-such-bucket/x/', ['--cache', m.cache], {
        cwd: m.cwd,
        env: env(),
      });
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain('no-such-bucket');
      const refused = await run(fixture, sandbox, `s3://${BUCKET}/y/`, ['--cache', m.cache], {
        cwd: m.cwd,
        env: {
          ...env(),
          AWS_ACCESS_KEY_ID: 'AKIAWRONGKEY0000',
          AWS_SECRET_ACCESS_KEY: 'wrongSECRETwrongSECRET',
        },
      });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(BUCKET);
      expect(refused.stderr).not.toContain('wrongSECRETwrongSECRET');
      expect(sandbox.stats.creates).toBe(0);
      expect(await readFile(path.join(m.cache, 'run.log'), 'utf8').catch(() => '')).not.toContain(
        'wrongSECRET',
      );
    } finally {
      await sandbox.close();
    }
  });
});
