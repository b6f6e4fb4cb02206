/**
 * What the README and deploy/ show users is what works: the library example compiles against the
 * package's own types, every value the package exports is documented, and the systemd example fails
 * (and alerts) on a night that is not all right, judged by the unit's own rules on a real run.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as library from '../../src/index.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { canaryKey, sandboxForTest } from '../helpers/sandbox.js';
import { tempDir } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';

/** The README's section under `## <heading>`, up to the next `## `. */
async function readmeSection(heading: string): Promise<string> {
  const text = await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const start = text.indexOf(`\n## ${heading}\n`);
  expect(start, `README has a "## ${heading}" section`).toBeGreaterThan(0);
  const end = text.indexOf('\n## ', start + 4);
  return text.slice(start, end < 0 ? undefined : end);
}

/** The type errors of `code` compiled as a module of this repository, `kitchen-batch` being `src/index.ts`. */
function typeErrors(code: string): string[] {
  const file = path.join(REPO_ROOT, 'test', 'docs', '__readme_example__.ts');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: ['node'],
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: true,
    noEmit: true,
    paths: { 'kitchen-batch': [path.join(REPO_ROOT, 'src', 'index.ts')] },
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile: read } = host;
  host.fileExists = (name) => name === file || fileExists.call(host, name);
  host.readFile = (name) => (name === file ? code : read.call(host, name));
  host.getSourceFile = (name, language, ...rest) =>
    name === file
      ? ts.createSourceFile(name, code, language)
      : getSourceFile.call(host, name, language, ...rest);
  const program = ts.createProgram([file], options, host);
  const source = program.getSourceFile(file)!;
  return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  );
}

/** `key=value` settings of a systemd unit file (a key given twice keeps both values, in order). */
function unitSettings(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (match) settings.set(match[1]!, [...(settings.get(match[1]!) ?? []), match[2]!]);
  }
  return settings;
}

describe('the README and deploy/ examples', () => {
  it('#8 the README library example compiles against the package, and every value the package exports is documented', async () => {
    const section = await readmeSection('Library use');
    const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) expect(typeErrors(block), block).toEqual([]);
    for (const name of Object.keys(library)) expect(section, `README names ${name}`).toContain(name);
  }, 60_000);

  it('#9 the systemd unit fails, and alerts, on a night where every item failed', async () => {
    const tmp = await tempDir('kb-deploy-');
    try {
      const unit = unitSettings(await readFile(path.join(REPO_ROOT, 'deploy/kitchen-batch.service'), 'utf8'));
      // Success is exit 0 and what SuccessExitStatus= adds (systemd.service(5)).
      const success = new Set([
        0,
        ...(unit.get('SuccessExitStatus') ?? []).flatMap((v) => v.split(/\s+/).map(Number)),
      ]);
      // The unit's own command line, on a catalogue of two and a service where every job fails.
      const exec = unit.get('ExecStart')![0]!.split(/\s+/);
      const args = exec.slice(exec.indexOf('run'));
      await writeFile(tmp.file('k1.jpg'), await kitchenJpeg(1, 160, 120));
      await writeFile(tmp.file('k2.jpg'), await kitchenJpeg(2, 160, 120));
      await writeFile(
        tmp.file('catalogue.csv'),
        'id,image,module,style\nk1,k1.jpg,change-style,modern\nk2,k2.jpg,change-style,modern\n',
      );
      const local = args.map((a) =>
        a === '/srv/kitchen/catalogue.csv'
          ? tmp.file('catalogue.csv')
          : a === '/srv/kitchen/out'
            ? tmp.file('out')
            : a,
      );
      expect(local).toContain(tmp.file('out'));
      const key = canaryKey();
      const sandbox = await sandboxForTest({ apiKey: key, processingMs: 200, jitterMs: 0 });
      sandbox.setFaults({ failRate: 1 });
      const night = await runCli(local, { env: { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url } });
      expect(JSON.parse(night.stdout)).toMatchObject({ totals: { failed: 2 } });
      expect(success.has(night.code!), `exit ${night.code} counts as success`).toBe(false);
      // The failure starts an alert unit that deploy/ ships.
      const [onFailure] = unit.get('OnFailure') ?? [];
      expect(onFailure).toMatch(/@%n\.service$/);
      const template = `${onFailure!.slice(0, onFailure!.indexOf('@') + 1)}.service`;
      expect(existsSync(path.join(REPO_ROOT, 'deploy', template)), template).toBe(true);
      // And systemd reads the units as they are written, where it is installed.
      if (existsSync('/usr/bin/systemd-analyze')) {
        for (const name of ['kitchen-batch.service', 'kitchen-batch.timer', template])
          await copyFile(path.join(REPO_ROOT, 'deploy', name), tmp.file(name));
        execFileSync(
          'systemd-analyze',
          ['verify', 'kitchen-batch.service', 'kitchen-batch.timer', template],
          {
            cwd: tmp.dir,
            stdio: 'pipe',
          },
        );
      }
    } finally {
      await tmp.remove();
    }
  }, 60_000);
});
