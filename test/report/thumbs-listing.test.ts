/**
 * report.html's thumbnails on a bucket: which exist is read from one listing of `thumbs/`, not a
 * HEAD per thumbnail (at 10,000 items that was a third of a run's S3 requests), and a second report
 * reuses every thumbnail without a request per thumbnail.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ensureThumbnails, type ThumbJob } from '../../src/report/thumbs.js';
import { localSources } from '../../src/storage/local-source.js';
import { createS3Client } from '../../src/storage/s3/client.js';
import { S3OutputStore } from '../../src/storage/s3/output-store.js';
import { type ConditionalS3, startConditionalS3 } from '../support/s3-conditional.js';

const BUCKET = 'thumbs';
let s3: ConditionalS3;
let dir: string;

beforeAll(async () => {
  s3 = await startConditionalS3([BUCKET]);
  dir = await mkdtemp(path.join(tmpdir(), 'kb-thumbs-list-'));
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
});
afterAll(async () => {
  vi.unstubAllEnvs();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

describe('ensureThumbnails on a bucket', () => {
  it('lists thumbs/ once instead of a HEAD each; a second pass reuses all with no HEAD or PUT', async () => {
    const jobs: ThumbJob[] = [];
    for (let i = 0; i < 12; i++) {
      const file = path.join(dir, `photo-${i}.jpg`);
      await sharp({
        create: { width: 900, height: 600, channels: 3, background: { r: i * 20, g: 90, b: 40 } },
      })
        .jpeg()
        .toFile(file);
      jobs.push({ source: file, dest: `thumbs/photo-${i}.webp` });
    }
    const access = createS3Client({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' });
    const output = new S3OutputStore({ access, bucket: BUCKET, prefix: 'night/', cacheDir: dir });
    const pass = async () => {
      const mark = s3.requests.length;
      const outcomes = await ensureThumbnails(jobs, {
        size: 160,
        concurrency: 4,
        sources: localSources,
        output,
      });
      const seen = s3.requests.slice(mark);
      const count = (method: string, sub: string) =>
        seen.filter((r) => r.method === method && r.key.startsWith(`${BUCKET}/night/${sub}`)).length;
      return {
        states: [...outcomes.values()].map((o) => o.state),
        heads: count('HEAD', 'thumbs/'),
        puts: count('PUT', 'thumbs/'),
        lists: seen.filter((r) => r.method === 'GET' && !r.key.startsWith(`${BUCKET}/night/`)).length,
      };
    };
    const first = await pass();
    expect(first.states).toEqual(jobs.map(() => 'created'));
    expect(first).toMatchObject({ heads: 0, puts: jobs.length, lists: 1 });
    const second = await pass();
    expect(second.states).toEqual(jobs.map(() => 'reused'));
    expect(second).toMatchObject({ heads: 0, puts: 0, lists: 1 });
  });
});
