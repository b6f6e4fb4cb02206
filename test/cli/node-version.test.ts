/**
 * The supported Node.js versions: `engines.node`, the check the executable makes before it loads
 * anything, and what a Node that is too old gets (a real child process of that Node, when the
 * machine has one: `KITCHEN_TEST_OLD_NODE`, else `/usr/bin/node` or `/usr/local/bin/node` when older
 * than 22.12; CI's machines have Node 20 there).
 */
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MIN_NODE, unsupportedNode } from '../../src/node-version.js';
import { killAllClis, REPO_ROOT, runCli } from '../helpers/cli.js';

afterEach(killAllClis);

/** A Node.js executable older than the supported ones, and its version; null when there is none. */
function oldNode(): { node: string; version: string } | null {
  const candidates = [process.env.KITCHEN_TEST_OLD_NODE, '/usr/bin/node', '/usr/local/bin/node'];
  for (const node of candidates) {
    if (!node) continue;
    try {
      const version = execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
      if (unsupportedNode(version)) return { node, version };
    } catch {
      // not there, or not a Node
    }
  }
  return null;
}

const old = oldNode();

describe('supported Node.js versions', () => {
  it('engines.node is the version the executable checks, and the running Node passes it', async () => {
    const pkg = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      engines: { node: string };
    };
    expect(pkg.engines.node).toBe(`>=${MIN_NODE.major}.${MIN_NODE.minor}.0`);
    expect(unsupportedNode(process.versions.node)).toBeNull();
  });

  it('lets 22.12 and later through, and names the supported versions to older ones', () => {
    for (const ok of ['22.12.0', '22.23.3', '23.0.0', '24.21.0', '26.12.1', '30.1.2']) {
      expect(unsupportedNode(ok), ok).toBeNull();
    }
    for (const tooOld of ['22.11.0', '22.0.0', '20.20.2', '18.20.8', 'v20.9.0']) {
      const message = unsupportedNode(tooOld);
      expect(message, tooOld).toContain(`Node.js ${tooOld} is not supported`);
      expect(message, tooOld).toContain('Node.js 22.12 or later (the LTS lines 22, 24 and 26)');
    }
    // Unreadable: let through rather than refuse a Node that may well work.
    expect(unsupportedNode('nightly')).toBeNull();
  });

  it.skipIf(!old)(
    `on an older Node (${old?.version ?? 'none found'}) the executable exits 2 at once, naming the supported versions`,
    async () => {
      const started = Date.now();
      const ran = await runCli(['run', 'manifests/sample.csv', '--sandbox'], { node: old!.node });
      expect(ran.code).toBe(2);
      expect(ran.stderr).toBe(
        `kitchen-batch: Node.js ${old!.version} is not supported: kitchen-batch needs Node.js 22.12 or later (the LTS lines 22, 24 and 26); see "Install" in the README for how to get one\n`,
      );
      expect(ran.stdout).toBe('');
      // At once: nothing of the run started (no sandbox, no output folder).
      expect(Date.now() - started).toBeLessThan(10_000);
      const json = await runCli(['--version', '--json'], { node: old!.node });
      expect(json.code).toBe(2);
      expect(JSON.parse(json.stdout)).toMatchObject({ exit_code: 2, error: { code: 'unsupported_node' } });
    },
  );
});
