/**
 * Issue 29, item 6: two manifests must never share one output folder silently
 * (docs/contract.md#output-folder). `cat.json` and `cat.jsonl` side by side, each run with
 * `--sandbox` from the same folder, as a user would: the second gets a default folder of its own;
 * a folder named with `--out` that holds another manifest's run is refused (exit 2,
 * `manifest_changed`); the same manifest, named another way, edited or moved with its folder,
 * still resumes. The CLI's `main` runs in this process against its built-in sandbox.
 */
import { cp, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import { textSink } from '../helpers/cli.js';
import { useTempDir } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';

const tmp = useTempDir('kb-out-folder-');

/** Runs the CLI in `cwd` (default: the test's folder). */
async function cli(args: string[], cwd = tmp.dir) {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(args, { stdout, stderr, env: {}, cwd });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** `run <manifest> --sandbox --json`, its summary parsed. */
async function run(manifest: string, extra: string[] = [], cwd = tmp.dir) {
  const result = await cli(
    ['run', manifest, '--sandbox', '--json', '--no-progress', '--no-review', ...extra],
    cwd,
  );
  const summary = result.code <= 1 ? (JSON.parse(result.stdout) as RunSummary) : null;
  return { ...result, summary };
}

interface RunSummary {
  exit_code: number;
  out_dir: string;
  totals: { items: number; succeeded: number };
  done_earlier: number;
  submitted_now: number;
}

/** Images k1..k4 and two manifests: cat.json (k1, k2) and cat.jsonl (k3), all in the test's folder. */
async function twoManifests(): Promise<void> {
  for (let i = 1; i <= 4; i++) await tmp.write(`images/k${i}.jpg`, await kitchenJpeg(i, 160, 120));
  await writeFile(
    tmp.file('cat.json'),
    JSON.stringify([
      { image: 'images/k1.jpg', style: 'modern' },
      { image: 'images/k2.jpg', style: 'modern' },
    ]),
  );
  await writeFile(tmp.file('cat.jsonl'), `${JSON.stringify({ image: 'images/k3.jpg', style: 'japandi' })}\n`);
}

async function reportIds(out: string): Promise<string[]> {
  const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as {
    items: Array<{ id: string }>;
  };
  return report.items.map((i) => i.id);
}

describe('one output folder, one manifest (issue 29, item 6)', () => {
  it('cat.json then cat.jsonl: the second gets its own default folder; each reruns where it ran', async () => {
    await twoManifests();
    const first = await run('cat.json');
    expect(first.code, first.stderr).toBe(0);
    expect(first.summary?.out_dir).toBe(tmp.file('output/cat'));

    const second = await run('cat.jsonl');
    expect(second.code, second.stderr).toBe(0);
    expect(second.summary?.out_dir).toBe(tmp.file('output/cat.jsonl'));
    expect(second.summary?.submitted_now).toBe(1);
    // It says where it went and why, naming the other manifest.
    expect(second.stderr).toContain(`${tmp.file('output/cat')} holds the run of another manifest`);
    expect(second.stderr).toContain(tmp.file('cat.json'));
    // Neither folder mixes the other's items.
    expect(await reportIds(tmp.file('output/cat'))).toEqual(['k1__modern', 'k2__modern']);
    expect((await readdir(tmp.file('output/cat/results'))).sort()).toEqual([
      'k1__modern.jpg',
      'k2__modern.jpg',
    ]);
    expect(await reportIds(tmp.file('output/cat.jsonl'))).toEqual(['k3__japandi']);
    expect(await readdir(tmp.file('output/cat.jsonl/results'))).toEqual(['k3__japandi.jpg']);

    // Reruns resume where each ran, whatever the path says: nothing is submitted again.
    for (const [manifest, out] of [
      ['cat.json', 'output/cat'],
      ['./cat.jsonl', 'output/cat.jsonl'],
      [tmp.file('cat.json'), 'output/cat'],
    ] as const) {
      const again = await run(manifest);
      expect(again.code, `${manifest}: ${again.stderr}`).toBe(0);
      expect(again.summary?.out_dir, manifest).toBe(tmp.file(out));
      expect(again.summary?.submitted_now, manifest).toBe(0);
    }
    // From another folder, naming the same folder: the same run.
    const elsewhere = await run('../cat.json', ['--out', '../output/cat'], tmp.file('images'));
    expect(elsewhere.code, elsewhere.stderr).toBe(0);
    expect(elsewhere.summary?.submitted_now).toBe(0);
    // plan shows the folder the run would take, and nothing to submit.
    const plan = await cli(['plan', 'cat.jsonl', '--json']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({
      out_dir: tmp.file('output/cat.jsonl'),
      summary: { submit: 0 },
    });

    // The same manifest edited (a new row) is the same run: only the new row is submitted.
    await writeFile(
      tmp.file('cat.json'),
      JSON.stringify([
        { image: 'images/k1.jpg', style: 'modern' },
        { image: 'images/k2.jpg', style: 'modern' },
        { image: 'images/k4.jpg', style: 'modern' },
      ]),
    );
    const edited = await run('cat.json');
    expect(edited.code, edited.stderr).toBe(0);
    expect(edited.summary).toMatchObject({
      out_dir: tmp.file('output/cat'),
      done_earlier: 2,
      submitted_now: 1,
    });
  });

  it('--out naming a folder that holds another manifest run: exit 2, manifest_changed, naming both and --out; plan too', async () => {
    await twoManifests();
    expect((await run('cat.json')).code).toBe(0);
    const refused = await run('cat.jsonl', ['--out', 'output/cat']);
    expect(refused.code).toBe(2);
    expect(JSON.parse(refused.stdout)).toMatchObject({ exit_code: 2, error: { code: 'manifest_changed' } });
    const message = JSON.parse(refused.stdout).error.message as string;
    expect(message).toContain(tmp.file('output/cat'));
    expect(message).toContain(tmp.file('cat.json'));
    expect(message).toContain(tmp.file('cat.jsonl'));
    expect(message).toContain('--out DIR');
    // Nothing of it reached the folder: its report and results are cat.json's alone.
    expect(await reportIds(tmp.file('output/cat'))).toEqual(['k1__modern', 'k2__modern']);
    expect((await readdir(tmp.file('output/cat/results'))).length).toBe(2);

    const plan = await cli(['plan', 'cat.jsonl', '--out', 'output/cat']);
    expect(plan.code).toBe(2);
    expect(plan.stderr).toContain('holds the run of another manifest');
    expect(plan.stderr).toContain(tmp.file('cat.json'));
  });

  it('a renamed manifest continues its folder only with --manifest-renamed; a folder moved with its manifest resumes', async () => {
    await twoManifests();
    expect((await run('cat.json')).code).toBe(0);
    await rename(tmp.file('cat.json'), tmp.file('kitchens.json'));
    const refused = await run('kitchens.json', ['--out', 'output/cat']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--manifest-renamed');
    const renamed = await run('kitchens.json', ['--out', 'output/cat', '--manifest-renamed']);
    expect(renamed.code, renamed.stderr).toBe(0);
    expect(renamed.summary).toMatchObject({ done_earlier: 2, submitted_now: 0 });
    // The folder's run is now of kitchens.json.
    expect((await run('kitchens.json', ['--out', 'output/cat'])).code).toBe(0);

    // The whole project moved elsewhere: the manifest is where it was relative to the folder.
    const moved = `${tmp.dir}-moved`;
    await cp(tmp.dir, moved, { recursive: true });
    const there = await run('kitchens.json', ['--out', 'output/cat'], moved);
    expect(there.code, there.stderr).toBe(0);
    expect(there.summary).toMatchObject({ done_earlier: 2, submitted_now: 0 });
    await import('node:fs/promises').then((fs) => fs.rm(moved, { recursive: true, force: true }));
  });
});
