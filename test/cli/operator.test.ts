/**
 * Operator and library use (issue 14): `-v`/`--verbose` mirrors run.log on stderr in a human form,
 * `runBatch()` takes the caller's pino logger and reads the service from the environment, and the key
 * appears in none of it.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { runBatch } from '../../src/pipeline/run.js';
import { closeWorkspaces, workspace } from '../helpers/batch.js';
import { runCli } from '../helpers/cli.js';

afterEach(closeWorkspaces);

describe('operator and library use', () => {
  it('-v mirrors run.log on stderr as readable lines, the key redacted', async () => {
    const ws = await workspace({ items: 2 });
    const result = await runCli(
      ['run', ws.manifest, '--base-url', ws.sandbox.url, '--out', ws.out, '-v', '--no-progress'],
      { cwd: ws.dir, env: { KITCHEN_API_KEY: ws.apiKey } },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^\d\d:\d\d:\d\d INFO {2}run started {2}event=run_start /m);
    expect(result.stderr).toMatch(/INFO {2}job accepted {2}event=accepted item=k0__scandinavian job_id=job_/);
    expect(result.stderr).toMatch(/INFO {2}run finished/);
    const log = await readFile(path.join(ws.out, 'run.log'), 'utf8');
    expect(log.split('\n').filter(Boolean).length).toBeGreaterThan(3);
    for (const text of [result.stderr, result.stdout, log]) expect(text.includes(ws.apiKey)).toBe(false);
  });

  it('runBatch gives every log line to the caller’s logger and reads the service from the environment', async () => {
    const ws = await workspace({ items: 2 });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const saved = { url: process.env.KITCHEN_API_BASE_URL, key: process.env.KITCHEN_API_KEY };
    process.env.KITCHEN_API_BASE_URL = ws.sandbox.url;
    process.env.KITCHEN_API_KEY = ws.apiKey;
    try {
      const result = await runBatch({
        manifest: ws.manifest,
        out: ws.out,
        cwd: ws.dir,
        logger,
        output: { html: false },
      });
      expect(result.exitCode).toBe(0);
    } finally {
      for (const [name, value] of [
        ['KITCHEN_API_BASE_URL', saved.url],
        ['KITCHEN_API_KEY', saved.key],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    const events = lines.map((l) => l.event);
    expect(events).toContain('run_start');
    expect(events.filter((e) => e === 'accepted')).toHaveLength(2);
    expect(events).toContain('run_end');
    expect(JSON.stringify(lines).includes(ws.apiKey)).toBe(false);
    // Without the environment and without `service`, the error names what is missing.
    await expect(runBatch({ manifest: ws.manifest, out: ws.out, cwd: ws.dir })).rejects.toThrow(
      /KITCHEN_API_/,
    );
  });
});
