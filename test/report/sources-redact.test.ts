/**
 * Issue 32's "Secrets in URLs": an item whose `image` is a pre-signed URL keeps it whole in its state
 * (the journal, Redis: a rerun needs the signature), while report.json, report.csv, report.html,
 * run.log, the progress lines and the run's summary show its secret parameters as `***`.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ProgressPrinter } from '../../src/commands/progress.js';
import { summary } from '../../src/commands/run.js';
import { reportItem, shownItem } from '../../src/report/build.js';
import { writeReports } from '../../src/report/write.js';
import { applyRecord, newItemState } from '../../src/state/state.js';
import { createRunLogger, humanLogger } from '../../src/util/logger.js';
import { textSink } from '../helpers/cli.js';
import { tempDirForTest } from '../helpers/tmp.js';

/** The secrets of the URLs below: none may show anywhere a person reads. */
const SECRETS = [
  'c1d2e3f4a5b6sigvalue',
  'AKIATESTCREDENTIAL',
  'FwoGZXIvYXdzSESSIONtok',
  'azSASsig99',
  'tok3n',
  'k3yvalue',
];

/** An S3 pre-signed URL (SigV4, with a session token), and a URL with the other secret parameters. */
const PRESIGNED =
  'https://kitchens.s3.eu-west-1.amazonaws.com/k1.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
  '&X-Amz-Credential=AKIATESTCREDENTIAL%2F20261126%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20261126T120000Z' +
  '&X-Amz-Expires=3600&X-Amz-Security-Token=FwoGZXIvYXdzSESSIONtok&X-Amz-SignedHeaders=host' +
  '&X-Amz-Signature=c1d2e3f4a5b6sigvalue';
const OTHERS =
  'https://cdn.example.com/k2.jpg?Expires=1790000000&sig=azSASsig99&token=tok3n&key=k3yvalue&w=800';

function expectRedacted(text: string): void {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

/** Two items' states as the journal keeps them: URLs whole. */
function states() {
  const forbidden = newItemState({
    t: 'item',
    id: 'k1__modern',
    fp: 'fp1',
    image: PRESIGNED,
    module: 'change-style',
    style: 'modern',
    src: null,
  });
  applyRecord(forbidden, {
    t: 'rejected',
    id: 'k1__modern',
    fp: 'fp1',
    error: { code: 'source_forbidden', message: `the source answered 403 for ${PRESIGNED}.` },
  });
  const waiting = newItemState({
    t: 'item',
    id: 'k2__modern',
    fp: 'fp2',
    image: OTHERS,
    module: 'change-style',
    style: 'modern',
    src: null,
  });
  return [forbidden, waiting];
}

describe('reports of items whose image is a pre-signed URL', () => {
  it('report.json, report.csv and report.html show the secret parameters as ***; the states keep them', async () => {
    const tmp = await tempDirForTest('kb-redact-');
    const items = states();
    const written = await writeReports(tmp.dir, {
      info: { manifest: 'feed.csv', base_url: 'https://api.example.com', started_at: 'a', finished_at: 'b' },
      rows: () => items.map(reportItem),
    });
    const json = await readFile(tmp.file('report.json'), 'utf8');
    const csv = await readFile(tmp.file('report.csv'), 'utf8');
    const html = await readFile(tmp.file('report.html'), 'utf8');
    for (const text of [json, csv, html]) expectRedacted(text);
    const report = JSON.parse(json) as { items: Array<{ image: string; error: { message: string } | null }> };
    expect(report.items[0]!.image).toBe(
      'https://kitchens.s3.eu-west-1.amazonaws.com/k1.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
        '&X-Amz-Credential=***&X-Amz-Date=20261126T120000Z&X-Amz-Expires=3600' +
        '&X-Amz-Security-Token=***&X-Amz-SignedHeaders=host&X-Amz-Signature=***',
    );
    expect(report.items[0]!.error!.message).toContain(
      '403 for https://kitchens.s3.eu-west-1.amazonaws.com/k1.jpg?',
    );
    expect(report.items[0]!.error!.message).toMatch(/X-Amz-Signature=\*\*\*\.$/);
    // `Expires` says when a link dies: it stays.
    expect(report.items[1]!.image).toBe(
      'https://cdn.example.com/k2.jpg?Expires=1790000000&sig=***&token=***&key=***&w=800',
    );
    expect(csv).toContain(
      'https://cdn.example.com/k2.jpg?Expires=1790000000&sig=***&token=***&key=***&w=800',
    );
    // The page's data (JSON inside a script element) carries the redacted URL.
    expect(html).toContain('X-Amz-Signature=***');
    // The summary's problems are the redacted rows too.
    expectRedacted(JSON.stringify(written.problems));
    // The states (what the journal and Redis hold) still have the whole URL.
    expect(items[0]!.image).toBe(PRESIGNED);
  });

  it('shownItem leaves an item without URLs as the same object (no copy per row)', () => {
    const local = reportItem(
      newItemState({
        t: 'item',
        id: 'k',
        fp: 'f',
        image: 'images/k.jpg',
        module: 'm',
        style: null,
        src: null,
      }),
    );
    expect(shownItem(local)).toBe(local);
  });

  it("the run's summary on stdout shows the problems redacted", () => {
    const problems = states().map((s) => reportItem(s));
    const text = summary(
      {
        exitCode: 1,
        outDir: '/out',
        problems,
        resumed: { doneEarlier: 0, submittedNow: 0 },
        run: {
          manifest: 'feed.csv',
          base_url: 'https://api.example.com',
          started_at: 'a',
          finished_at: 'b',
          totals: {
            items: 2,
            succeeded: 0,
            failed: 0,
            rejected: 1,
            incomplete: 1,
            possible_duplicates: 0,
            needs_review: 0,
          },
        },
      },
      false,
      false,
    );
    expect(text).toContain('source_forbidden the source answered 403 for https://kitchens.s3');
    expectRedacted(text);
  });
});

describe('run.log, --verbose and progress lines', () => {
  it('redact URLs in any string field and in the message; the line stays valid JSON', () => {
    const lines: string[] = [];
    const verbose = textSink();
    const logger = createRunLogger({
      stream: { write: (line: string) => lines.push(line) },
      mirror: humanLogger(verbose),
    });
    logger.warn(
      { event: 'source_failed', image: PRESIGNED, detail: { ref: OTHERS, note: 'no URL here' } },
      `fetch of "${PRESIGNED}" failed\ttwice; then ${OTHERS}`,
    );
    logger.info({ event: 'plain', path: '/data/k1.jpg' }, 'a line without URLs is written as it is');
    expect(lines).toHaveLength(2);
    expectRedacted(lines.join(''));
    const entry = JSON.parse(lines[0]!) as {
      image: string;
      detail: { ref: string; note: string };
      msg: string;
    };
    expect(entry.image).toContain('X-Amz-Signature=***');
    expect(entry.image).toContain('X-Amz-Expires=3600');
    expect(entry.detail).toEqual({
      ref: 'https://cdn.example.com/k2.jpg?Expires=1790000000&sig=***&token=***&key=***&w=800',
      note: 'no URL here',
    });
    // The quotes and the tab around a URL in the message (escaped in JSON) survive.
    expect(entry.msg).toMatch(
      /^fetch of "https:\/\/kitchens\.s3[^"]*X-Amz-Signature=\*\*\*" failed\ttwice; then https:\/\/cdn/,
    );
    expect(JSON.parse(lines[1]!)).toMatchObject({ path: '/data/k1.jpg' });
    expectRedacted(verbose.text());
    expect(verbose.text()).toContain('X-Amz-Signature=***');
  });

  it('a warning on the progress stream (a manifest or source warning quoting a URL) is redacted', () => {
    const stream = textSink();
    const progress = new ProgressPrinter({ stream, mode: 'plain' });
    progress.handle({ type: 'warning', message: `cannot list ${OTHERS}; retrying` });
    expect(stream.text()).toBe(
      'warning: cannot list https://cdn.example.com/k2.jpg?Expires=1790000000&sig=***&token=***&key=***&w=800; retrying\n',
    );
  });
});
