/**
 * Real S3-compatible servers for the tests, in-process on 127.0.0.1, port 0 (see
 * /work/shared/S3-TESTING.md for what each implements): fauxqs 2.4.1 (pages ListObjectsV2, answers
 * 304 to If-None-Match on GET, takes any credentials) and s3rver 3.7.1 (knows one access key,
 * `S3RVER`, and refuses others with 403 InvalidAccessKeyId: the only "forbidden" either can say).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { startFauxqs } from 'fauxqs';
import S3rver from 's3rver';

/** A running server: its endpoint URL and how to stop it. */
export interface TestS3Server {
  endpoint: string;
  close(): Promise<void>;
}

/** fauxqs with `buckets` created (names of 3+ characters). */
export async function startFauxqsServer(buckets: string[]): Promise<TestS3Server> {
  const server = await startFauxqs({ port: 0, host: '127.0.0.1', logger: false });
  for (const bucket of buckets) server.createBucket(bucket);
  return { endpoint: `http://127.0.0.1:${server.port}`, close: () => server.stop() };
}

/** s3rver over a temporary folder with `buckets` created; the folder is removed on close. */
export async function startS3rverServer(buckets: string[]): Promise<TestS3Server> {
  const directory = await mkdtemp(path.join(tmpdir(), 'kb-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: buckets.map((name) => ({ name })),
  });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: async () => {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/** Puts each `key → body` (Buffer bodies: no aws-chunked framing on any server). */
export async function putObjects(client: S3Client, bucket: string, objects: Record<string, string | Buffer>) {
  for (const [key, body] of Object.entries(objects)) {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: Buffer.from(body) }));
  }
}

/** Fake AWS credentials for the tests: they must never show in a message or description. */
export const FAKE_KEY_ID = 'AKIATESTKEY7EXAMPLE1';
export const FAKE_SECRET = 'secretTESTwJalrXUtnFEMIK7MDENGbPxRfiCY';
export const FAKE_SESSION = 'sessionTESTtokenIQoJb3JpZ2luX2VjEJr';
