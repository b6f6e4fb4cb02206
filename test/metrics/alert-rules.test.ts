/**
 * deploy/prometheus/kitchen-batch-rules.yml, the alert rules the README tells operators to copy:
 * Debian's promtool checks them and runs their unit tests (kitchen-batch-rules.test.yml), and every
 * metric they name is one kitchen-batch exports (or Prometheus's own `up`).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const PROMTOOL = '/usr/bin/promtool';
const DIR = path.resolve(import.meta.dirname, '../../deploy/prometheus');
const RULES = path.join(DIR, 'kitchen-batch-rules.yml');
const run = promisify(execFile);

describe.skipIf(!existsSync(PROMTOOL))('the alert rules in deploy/prometheus (promtool)', () => {
  it('promtool check rules accepts them', async () => {
    const { stdout } = await run(PROMTOOL, ['check', 'rules', RULES]);
    expect(stdout).toMatch(/SUCCESS: 7 rules found/);
  });

  it('promtool test rules: each alert fires where it should and stays quiet where it should not', async () => {
    const { stdout } = await run(PROMTOOL, ['test', 'rules', 'kitchen-batch-rules.test.yml'], { cwd: DIR });
    expect(stdout).toMatch(/SUCCESS/);
  });

  it('names only metrics kitchen-batch exports, and has a test for every alert', async () => {
    const rules = await readFile(RULES, 'utf8');
    const tests = await readFile(path.join(DIR, 'kitchen-batch-rules.test.yml'), 'utf8');
    const src = path.resolve(import.meta.dirname, '../../src');
    const files = (await readdir(src, { recursive: true })).filter((f) => f.endsWith('.ts'));
    const source = (await Promise.all(files.map((f) => readFile(path.join(src, f), 'utf8')))).join('\n');
    const named = new Set(rules.match(/\bkitchen_batch_[a-z_]+\b/g));
    expect(named.size).toBeGreaterThan(3);
    for (const metric of named) expect(source, metric).toContain(`'${metric}'`);
    for (const [, alert] of rules.matchAll(/- alert: (\w+)/g)) {
      expect(tests, alert).toContain(`alertname: ${alert}`);
    }
  });
});
