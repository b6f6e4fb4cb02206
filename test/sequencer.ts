/**
 * The order the suite's files start in: longest first, so that on two cores the long files do not
 * start last and leave the other forks idle at the end. Vitest orders by the durations it cached on
 * an earlier run; a clean clone (CI) has no cache, and Vitest then orders by file size, which put
 * files of 10–30 s (clock, rate, auth) at the very end. So a file without a cached duration takes
 * its duration from `test/durations.json` (whole seconds, files of 2 s or more), and one not listed
 * there counts as 0 s. To refresh the list: `npx vitest run --reporter=json --outputFile=t.json`, then
 * each file's `endTime - startTime` in `t.json`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const ROOT = path.resolve(import.meta.dirname, '..');
const LISTED = JSON.parse(readFileSync(path.join(ROOT, 'test', 'durations.json'), 'utf8')) as Record<
  string,
  number
>;

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const seconds = (spec: TestSpecification): number => {
      const cached = cache.getTestSpecificationResult(spec);
      if (cached) return cached.duration / 1000;
      return LISTED[path.relative(ROOT, spec.moduleId).split(path.sep).join('/')] ?? 0;
    };
    const estimates = new Map(files.map((spec) => [spec, seconds(spec)]));
    return [...files].sort((a, b) => estimates.get(b)! - estimates.get(a)!);
  }
}
