import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import { StateError } from '../../src/errors.js';
import { inShard, parseShard } from '../../src/pipeline/shard.js';
import type { Report } from '../../src/types.js';
import { closeWorkspaces, thrown, type Workspace, workspace } from '../helpers/batch.js';
import { textSink } from '../helpers/cli.js';
import { createRequests } from '../helpers/sandbox.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

describe('--shard K/N and report --merge', () => {
  it('parses K/N strictly', () => {
    expect(parseShard('2/3')).toEqual({ index: 2, count: 3 });
    for (const bad of ['3/2', '0/2', '1/0', 'a/b', '1', '-1/2'])
      expect(() => parseShard(bad), bad).toThrow(/--shard/);
  });

  it('splits ids into disjoint parts that cover them all, the same way every time', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => `kitchen-${i}__modern`);
    const parts = [1, 2, 3, 4].map((index) => ids.filter((id) => inShard(id, { index, count: 4 })));
    expect(parts.reduce((n, p) => n + p.length, 0)).toBe(ids.length);
    expect(new Set(parts.flat()).size).toBe(ids.length);
    for (const part of parts) expect(part.length).toBeGreaterThan(1000);
  });

  it('two shards run into their own folders, and report --merge writes one combined report', async () => {
    ws = await workspace({ items: 8 });
    const dirs = [path.join(ws.dir, 'shard-1'), path.join(ws.dir, 'shard-2')];
    const first = await ws.run({ limits: { shard: { index: 1, count: 2 } }, out: dirs[0]! });
    const second = await ws.run({ limits: { shard: { index: 2, count: 2 } }, out: dirs[1]! });
    expect([first.exitCode, second.exitCode]).toEqual([0, 0]);
    expect(first.run.totals.items + second.run.totals.items).toBe(8);
    expect(createRequests(ws.sandbox)).toBe(8);
    const stdout = textSink();
    const stderr = textSink();
    const merged = path.join(ws.dir, 'merged');
    const code = await main(['report', '--merge', ...dirs, '--out', merged, '--json'], {
      stdout,
      stderr,
      env: {},
      cwd: ws.dir,
    });
    expect(stderr.text()).toBe('');
    expect(code).toBe(0);
    const report = JSON.parse(await readFile(path.join(merged, 'report.json'), 'utf8')) as Report;
    expect(report.run.totals).toMatchObject({ items: 8, succeeded: 8 });
    for (const item of report.items) {
      expect(item.output).toMatch(/^\.\.\/shard-[12]\/results\//);
      await readFile(path.join(merged, item.output!));
    }
    // Overlapping folders are refused.
    const again = await main(['report', '--merge', dirs[0]!, dirs[0]!, '--out', merged], {
      stdout,
      stderr,
      env: {},
      cwd: ws.dir,
    });
    expect(again).toBe(2);
  });

  it('a folder keeps its --shard K/N: another N, or no --shard, refuses (exit 2) before anything is sent', async () => {
    ws = await workspace({ items: 6 });
    const out = path.join(ws.dir, 'shard-1-of-2');
    const first = await ws.run({ limits: { shard: { index: 1, count: 2 } }, out });
    expect(first.exitCode).toBe(0);
    const sent = ws.sandbox.stats.requests.length;
    for (const shard of [{ index: 1, count: 3 }, null]) {
      const error = await thrown(() => ws!.run({ ...(shard ? { limits: { shard } } : {}), out }));
      expect(error).toBeInstanceOf(StateError);
      expect((error as StateError).code).toBe('shard_changed');
      expect((error as Error).message).toContain('holds shard 1/2');
    }
    expect(ws.sandbox.stats.requests.length).toBe(sent);
    // The same part resumes (nothing left to do); an unsharded folder may be narrowed to one part.
    expect((await ws.run({ limits: { shard: { index: 1, count: 2 } }, out })).exitCode).toBe(0);
    const whole = path.join(ws.dir, 'whole');
    expect((await ws.run({ out: whole })).exitCode).toBe(0);
    expect((await ws.run({ limits: { shard: { index: 2, count: 2 } }, out: whole })).exitCode).toBe(0);
  });
});
