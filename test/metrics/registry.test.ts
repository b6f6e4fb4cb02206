import { describe, expect, it } from 'vitest';
import { groupingUrl, parseMetricLabels } from '../../src/metrics/export.js';
import { RunMetrics } from '../../src/metrics/registry.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';

describe('run metrics', () => {
  it('counts items, submissions and job durations from run events, with no item id in a label', async () => {
    let now = 1_000_000;
    const metrics = new RunMetrics('9.9.9', () => now);
    metrics.handle({ type: 'item', id: 'secret-item-id', status: 'submitted', jobId: 'j1' });
    now += 3_000;
    metrics.handle({
      type: 'item',
      id: 'secret-item-id',
      status: 'failed',
      error: { code: 'nsfw', message: 'm' },
    });
    metrics.handle({ type: 'item', id: 'other', status: 'skipped' });
    const counts = { total: 2, pending: 0, running: 0, downloading: 0, succeeded: 0, failed: 1, rejected: 0 };
    const more = {
      incomplete: 0,
      skipped: 1,
      requests: 10,
      rateLimited: 2,
      retries: 1,
      rate: 4,
      elapsedMs: 5_000,
    };
    metrics.handle({ type: 'progress', counts: { ...counts, ...more } });
    metrics.handle({ type: 'progress', counts: { ...counts, ...more, requests: 12 } });
    metrics.handle({ type: 'request', endpoint: 'submit', status: '2xx' });
    metrics.handle({ type: 'request', endpoint: 'poll', status: '4xx' });
    metrics.handle({ type: 'request', endpoint: 'poll', status: '4xx' });
    metrics.finished({ needs_review: 2 });
    const text = await metrics.text();
    expect(text).toContain('kitchen_batch_items_total{outcome="failed",code="nsfw"} 1');
    expect(text).toContain('kitchen_batch_items_total{outcome="skipped",code=""} 1');
    expect(text).toContain('kitchen_batch_submissions_total 1');
    expect(text).toContain('kitchen_batch_api_requests_total{endpoint="submit",status="2xx"} 1');
    expect(text).toContain('kitchen_batch_api_requests_total{endpoint="poll",status="4xx"} 2');
    expect(text).toContain('kitchen_batch_api_rate_limited_total 2');
    expect(text).toContain('kitchen_batch_job_duration_seconds_sum 3');
    expect(text).toContain('kitchen_batch_jobs_in_flight 0');
    expect(text).toContain('kitchen_batch_build_info{version="9.9.9"} 1');
    expect(text).toContain('kitchen_batch_review_flagged_items 2');
    expect(text).not.toContain('secret-item-id');
    expect(text).not.toContain('last_success');
    expect(await metrics.successText(1_700_000_000_500)).toContain(
      'kitchen_batch_last_success_timestamp_seconds 1700000000',
    );
  });

  it('reads --metrics-label values and refuses bad names; the grouping URL carries them in base64', () => {
    expect(parseMetricLabels(['catalogue=a/b', 'env=prod'])).toEqual({ catalogue: 'a/b', env: 'prod' });
    for (const bad of ['job=x', '__x=1', '1a=2', 'novalue=', 'plain']) {
      expect(() => parseMetricLabels([bad]), bad).toThrow(/--metrics-label/);
    }
    expect(groupingUrl('http://pg:9091/', { catalogue: 'a/b' })).toBe(
      'http://pg:9091/metrics/job/kitchen-batch/catalogue@base64/YS9i',
    );
  });

  it('a bad --metrics-label or --pushgateway is exit 2 before anything runs', async () => {
    const bad = await runCli(['run', 'manifests/sample.csv', '--sandbox', '--metrics-label', 'job=x'], {
      cwd: REPO_ROOT,
    });
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toContain('--metrics-label "job=x"');
    const url = await runCli(
      ['run', 'manifests/sample.csv', '--sandbox', '--pushgateway', 'pg:9091?token=s3cret'],
      {
        cwd: REPO_ROOT,
      },
    );
    expect(url.code, url.stderr).toBe(2);
    expect(url.stderr).toContain('--pushgateway');
    expect(url.stderr).not.toContain('s3cret');
  });
});
