/**
 * Local resources (docs/faults.md E.24, E.25): an output folder that cannot be written, and a disk that
 * fills up mid-run. The disk-full cases mount a tiny tmpfs and so need root (skipped otherwise).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/index.js';
import { removeDir, tempDir } from '../helpers/tmp.js';
import { noise } from '../support/images.js';
import {
  createsPerItem,
  expectRerunComplete,
  expectSecretAbsent,
  type Fixture,
  fileSha,
  perTest,
  readJournalRecords,
  readReport,
  run,
  snapshot,
} from './world.js';

const world = perTest({ processingMs: 200, jitterMs: 50 });
const { cleanup } = world;

const isRoot = process.getuid?.() === 0;

/** Mounts a tmpfs at `dir` (created) with `options`; false when not permitted. Unmounted after the test. */
function mountTmpfs(dir: string, options: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { stdio: 'pipe' });
  } catch {
    return false;
  }
  cleanup.push(() => {
    try {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
    } catch {}
  });
  return true;
}

/** Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN). */
async function canMount(): Promise<boolean> {
  if (!isRoot) return false;
  const probe = await tempDir('kb-mount-probe-');
  const ok = mountTmpfs(probe.dir, 'size=64k');
  if (ok) execFileSync('umount', ['-l', probe.dir], { stdio: 'pipe' });
  await probe.remove();
  return ok;
}
const mountable = await canMount();

/** A fixture and its sandbox; `noisy` swaps in large noisy JPEGs, whose results (a few hundred KB) fill a tiny disk. */
async function setup(count: number, noisy = false): Promise<{ fixture: Fixture; sandbox: Sandbox }> {
  const { fixture, sandbox } = await world.setup(count);
  if (noisy)
    for (const [i, item] of fixture.items.entries()) {
      const jpeg = await noise(900, 700, { seed: i + 1 })
        .jpeg({ quality: 92 })
        .toBuffer();
      await writeFile(item.image, jpeg);
    }
  return { fixture, sandbox };
}

describe('output folder not writable', () => {
  it.skipIf(isRoot)(
    'a parent without write permission → exit 2 with a clear message, nothing sent',
    async () => {
      const { fixture, sandbox } = await setup(1);
      const parent = path.join(fixture.dir, 'locked');
      await mkdir(parent);
      await chmod(parent, 0o500);
      cleanup.push(() => chmod(parent, 0o700));
      const out = path.join(parent, 'out');
      const result = await run(fixture, sandbox, out);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(out);
      expect(result.stderr).toMatch(/EACCES|permission/i);
      expect(sandbox.stats.requests.length).toBe(0);
    },
  );

  it('a parent that is a file (ENOTDIR, which root cannot bypass) → exit 2, nothing sent', async () => {
    const { fixture, sandbox } = await setup(1);
    const file = path.join(fixture.dir, 'not-a-dir');
    await writeFile(file, 'x');
    const out = path.join(file, 'out');
    const result = await run(fixture, sandbox, out);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(out);
    expect(result.stderr).toMatch(/ENOTDIR|not a directory/i);
    expect(result.stderr).not.toMatch(/unexpected error/);
    expect(sandbox.stats.requests.length).toBe(0);
  });

  it.skipIf(!mountable)('a read-only file system (EROFS) → exit 2, nothing sent', async () => {
    const { fixture, sandbox } = await setup(1);
    const ro = path.join(fixture.dir, 'ro');
    await mkdir(ro);
    expect(mountTmpfs(ro, 'ro,size=1m')).toBe(true);
    const out = path.join(ro, 'out');
    const result = await run(fixture, sandbox, out);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(out);
    expect(sandbox.stats.requests.length).toBe(0);
  });

  (mountable ? it : it.skip)('a read-only file system is named as such (EROFS), not ENOENT', async () => {
    const { fixture, sandbox } = await setup(1);
    const ro = path.join(fixture.dir, 'ro');
    await mkdir(ro);
    expect(mountTmpfs(ro, 'ro,size=1m')).toBe(true);
    const result = await run(fixture, sandbox, path.join(ro, 'out'));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/EROFS|read-only/i);
  });
});

describe('disk full (tiny tmpfs)', () => {
  it.skipIf(!mountable)(
    'results that do not fit: no partial result marked succeeded, no .part left; after making room the rerun finishes without resubmitting',
    async () => {
      const { fixture, sandbox } = await setup(3, true);
      const disk = path.join(fixture.dir, 'disk');
      await mkdir(disk);
      expect(mountTmpfs(disk, 'size=320k')).toBe(true);
      const out = path.join(disk, 'out');
      const first = await run(fixture, sandbox, out);
      const context = `exit ${first.code}\nstdout:\n${first.stdout}\nstderr:\n${first.stderr}`;
      // Any non-zero exit with a message naming the cause (docs/faults.md E.24).
      expect([1, 2, 3], context).toContain(first.code);
      expect(first.stdout + first.stderr, context).toMatch(/ENOSPC|no space/i);
      expect(first.stderr, context).not.toMatch(/unexpected error/);
      // Whatever is marked done is whole; nothing half-written is left in results/.
      const records = await readJournalRecords(out);
      for (const r of records) {
        if (r.t !== 'downloaded') continue;
        expect(await fileSha(path.join(out, r.output)), `${r.id} recorded whole`).toBe(r.sha256);
      }
      const names = await readdir(path.join(out, 'results')).catch(() => []);
      expect(names.filter((n) => n.endsWith('.part'))).toEqual([]);
      if (existsSync(path.join(out, 'report.json'))) {
        const report = await readReport(out);
        for (const item of report.items.filter((i) => i.status === 'succeeded'))
          expect(await fileSha(path.join(out, item.output!))).toBe(item.sha256);
      }

      execFileSync('mount', ['-o', 'remount,size=64m', disk], { stdio: 'pipe' });
      const before = await snapshot(fixture, sandbox, out);
      const rerun = await run(fixture, sandbox, out);
      await expectRerunComplete(fixture, sandbox, out, before, rerun, 'disk-full results');
      await expectSecretAbsent(fixture.apiKey, out, [first.stdout, first.stderr, rerun.stdout, rerun.stderr]);
    },
  );

  /** Fills the tmpfs so `pages` 4 KiB pages stay free once the out folder exists, then runs. */
  async function runOnFullDisk(count: number, pages: number) {
    const { fixture, sandbox } = await setup(count);
    const disk = path.join(fixture.dir, 'disk');
    await mkdir(disk);
    expect(mountTmpfs(disk, 'size=96k')).toBe(true);
    const out = path.join(disk, 'out');
    await mkdir(path.join(out, 'results'), { recursive: true });
    const free = Number(
      execFileSync('df', ['--output=avail', '-B1', disk], { encoding: 'utf8' }).split('\n')[1],
    );
    await writeFile(path.join(disk, 'filler'), Buffer.alloc(Math.max(0, free - pages * 4096)));
    const first = await run(fixture, sandbox, out);
    return { fixture, sandbox, disk, out, first };
  }

  // 3 pages: the journal fails before any submission; 10 pages: after some jobs were created.
  it.skipIf(!mountable).each([3, 10])(
    'a journal that cannot be appended (%i pages free): exits non-zero, no POST without its intent on disk; after making room the rerun finishes, duplicates flagged',
    async (pages) => {
      const { fixture, sandbox, disk, out, first } = await runOnFullDisk(6, pages);
      const context = `exit ${first.code}\nstdout:\n${first.stdout}\nstderr:\n${first.stderr}`;
      expect(first.code, context).not.toBe(0);
      expect(first.code, context).not.toBe(null);
      expect(first.stderr, context).toMatch(/ENOSPC|no space/i);
      // The `submitting` record is fsynced before the POST leaves: every create the service saw
      // has its intent in the journal (else a rerun could not flag the duplicate).
      const records = await readJournalRecords(out);
      const creates = await createsPerItem(fixture, sandbox);
      for (const item of fixture.items) {
        const intents = records.filter((r) => r.t === 'submitting' && r.id === item.id).length;
        expect(
          creates.get(item.id) ?? 0,
          `${item.id}: creates vs journaled intents\n${context}`,
        ).toBeLessThanOrEqual(intents);
      }

      await removeDir(path.join(disk, 'filler'));
      execFileSync('mount', ['-o', 'remount,size=64m', disk], { stdio: 'pipe' });
      const before = await snapshot(fixture, sandbox, out);
      const rerun = await run(fixture, sandbox, out);
      await expectRerunComplete(fixture, sandbox, out, before, rerun, `disk-full journal (${pages} pages)`);
      await expectSecretAbsent(fixture.apiKey, out, [first.stdout, first.stderr, rerun.stdout, rerun.stderr]);
    },
  );

  (mountable ? it : it.skip)(
    'a journal that cannot be appended ends with a clear message, not an unexpected error',
    async () => {
      const { first } = await runOnFullDisk(3, 3);
      expect(first.stderr).toMatch(/ENOSPC/);
      expect(first.stderr).not.toMatch(/unexpected error/);
      expect(first.stderr).not.toMatch(/\n\s+at /); // no stack trace
    },
  );
});
