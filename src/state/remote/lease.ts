/**
 * The lock of a bucket run (docs/contract.md#outputs-in-object-storage): the object
 * `<prefix>.kitchen-batch/lease.json`, created with `If-None-Match: *` and holding its holder (as the
 * lock file does) and `renewed_at`; renewed every 10 s with `If-Match` on its ETag. A lease is
 * stale by the lock file's rules (`lock.ts` `staleReason`): its heartbeat (the later of `renewed_at`
 * and the object's Last-Modified, so a skewed clock never makes a live lease look old) is over 60 s
 * old, or its holder ran on this host and is gone. A stale lease is taken over with `If-Match` on the
 * stale ETag, so of two runs taking it one wins and the other sees a live holder.
 *
 * A renewal answered 412 or 404 means another run took the lease: `onLost` is called once and
 * renewing stops (the caller stops submitting; its next journal segment would be refused anyway).
 */
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { StateError } from '../../errors.js';
import type { S3Access } from '../../storage/s3/client.js';
import { formatS3Ref } from '../../storage/s3/ref.js';
import { isoWithOffset } from '../../util/time.js';
import {
  holderInfo,
  LOCK_HEARTBEAT_MS,
  LOCK_STALE_MS,
  type LockInfo,
  lockedError,
  parseHolder,
  staleReason,
} from '../lock.js';
import { leaseKey } from './keys.js';

/** Options of {@link acquireLease}. */
export interface LeaseOptions {
  access: S3Access;
  bucket: string;
  prefix: string;
  /** @default {@link LOCK_HEARTBEAT_MS} */
  heartbeatMs?: number;
  /** Called once when another run took the lease. */
  onLost?: (error: StateError) => void;
  /** The clock heartbeats are aged by (tests move it). @default Date.now */
  now?: () => number;
}

/** A held lease. */
export interface Lease {
  /** The lease object's URL, for messages. */
  describe: string;
  /** Set when a stale lease was taken over, with why it was stale. */
  tookOver: (LockInfo & { reason: string }) | null;
  release(): Promise<void>;
}

/** Leases this process holds (`bucket/key`): never taken over by itself, as the lock file's rule. */
const held = new Set<string>();

const status = (error: unknown) =>
  (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;

/** Takes the lease of the run under `prefix`; a `locked` {@link StateError} when a live run holds it. */
export async function acquireLease(options: LeaseOptions): Promise<Lease> {
  const { access, bucket } = options;
  const Key = leaseKey(options.prefix);
  const where = formatS3Ref(bucket, options.prefix).replace(/\/$/, '');
  const mine = holderInfo();
  const body = () => Buffer.from(`${JSON.stringify({ ...mine, renewed_at: isoWithOffset() })}\n`);
  const put = async (condition: { IfNoneMatch: '*' } | { IfMatch: string }) =>
    (
      await access.client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key,
          Body: body(),
          ContentType: 'application/json',
          ...condition,
        }),
      )
    ).ETag ?? '';
  let tookOver: Lease['tookOver'] = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    let etag: string | null = null;
    try {
      etag = await put({ IfNoneMatch: '*' });
    } catch (error) {
      if (status(error) !== 412) throw error;
    }
    if (etag === null) {
      const stored = await readLease(options, Key);
      if (!stored) continue; // released meanwhile
      const holder = parseHolder(stored.info);
      const reason = held.has(`${bucket}/${Key}`)
        ? null
        : holder
          ? staleReason(holder, stored.heartbeatMs, (options.now ?? Date.now)())
          : 'its object is unreadable';
      if (reason === null) throw lockedError(where, holder ?? mine);
      try {
        etag = await put({ IfMatch: stored.etag });
      } catch (error) {
        if (status(error) === 412 || status(error) === 404) continue; // another run was first
        throw error;
      }
      tookOver = { ...(holder ?? { pid: 0, host: 'unknown', started_at: 'unknown' }), reason };
    }
    held.add(`${bucket}/${Key}`);
    return hold(options, Key, where, etag, put, tookOver);
  }
  throw new StateError(
    'locked',
    `could not take the lease ${formatS3Ref(bucket, Key)}: it keeps changing hands`,
  );
}

/** The lease as stored: its holder, ETag and heartbeat; null when there is none. */
async function readLease(
  options: LeaseOptions,
  Key: string,
): Promise<{ info: Partial<LockInfo> | null; etag: string; heartbeatMs: number } | null> {
  try {
    const answer = await options.access.client.send(new GetObjectCommand({ Bucket: options.bucket, Key }));
    const text = (await answer.Body?.transformToString()) ?? '';
    let info: (Partial<LockInfo> & { renewed_at?: string }) | null = null;
    try {
      info = JSON.parse(text) as Partial<LockInfo> & { renewed_at?: string };
    } catch {}
    const renewed = Date.parse(String(info?.renewed_at ?? ''));
    const modified = answer.LastModified?.getTime() ?? 0;
    return {
      info,
      etag: answer.ETag ?? '',
      heartbeatMs: Math.max(Number.isNaN(renewed) ? 0 : renewed, modified),
    };
  } catch (error) {
    if (status(error) === 404) return null;
    throw error;
  }
}

/** Renews the held lease every heartbeat until released or lost. */
function hold(
  options: LeaseOptions,
  Key: string,
  where: string,
  first: string,
  put: (condition: { IfMatch: string }) => Promise<string>,
  tookOver: Lease['tookOver'],
): Lease {
  let etag = first;
  let lost = false;
  let released = false;
  let renewing: Promise<void> = Promise.resolve();
  let lastRenewed = Date.now();
  const lose = (why: string, cause?: unknown) => {
    if (lost || released) return;
    lost = true;
    clearInterval(timer);
    held.delete(`${options.bucket}/${Key}`);
    options.onLost?.(
      new StateError('lease_lost', `lost the lease of ${where}: ${why}; stopping new submissions`, { cause }),
    );
  };
  const timer = setInterval(() => {
    renewing = put({ IfMatch: etag }).then(
      (next) => {
        etag = next;
        lastRenewed = Date.now();
      },
      (error: unknown) => {
        const code = status(error);
        if (code === 412 || code === 404) lose('another run took it', error);
        // Unreachable for longer than a stale lease lives: another run may have taken it.
        else if (Date.now() - lastRenewed > LOCK_STALE_MS) lose('it could not be renewed for 60 s', error);
      },
    );
  }, options.heartbeatMs ?? LOCK_HEARTBEAT_MS);
  timer.unref();
  return {
    describe: formatS3Ref(options.bucket, Key),
    tookOver,
    release: async () => {
      if (released) return;
      released = true;
      clearInterval(timer);
      held.delete(`${options.bucket}/${Key}`);
      await renewing;
      if (lost) return;
      await options.access.client
        .send(new DeleteObjectCommand({ Bucket: options.bucket, Key }))
        .catch(() => {});
    },
  };
}
