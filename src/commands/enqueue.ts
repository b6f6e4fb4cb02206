/**
 * `kitchen-batch enqueue <manifest> --redis URL --out DIR` (docs/contract.md#worker-mode): plans the
 * manifest once and adds one BullMQ job per item that is not queued or done yet. A local image is
 * read once for its fingerprint; a remote one (https, `s3://`) only stat'ed: its version (ETag,
 * version id or Last-Modified) and size stand for its bytes, so no body crosses the network here
 * (the workers fetch what they work on). Adding is idempotent (the job id is the item's fingerprint
 * and id), so enqueueing again, or the same catalogue with new rows, adds only what is new.
 */
import path from 'node:path';
import type { Redis } from 'ioredis';
import PQueue from 'p-queue';
import { sourceFlagOptions } from '../config.js';
import { UsageError } from '../errors.js';
import { openManifest } from '../manifest/index.js';
import { defaultOutDir, fallbackOutDir, outLocation } from '../pipeline/options.js';
import { readLastRun, settleOutDir } from '../pipeline/out-dir.js';
import { resolveSourceAccess } from '../pipeline/source-access.js';
import { fingerprint } from '../stages/fingerprint.js';
import { localSources } from '../storage/local-source.js';
import { createSources, isRemoteRef, sourceKind } from '../storage/sources.js';
import type { SourceStore } from '../storage/types.js';
import type { Item } from '../types.js';
import { mapOrdered } from '../util/async.js';
import { sha256Stream } from '../util/fs.js';
import { redactUrlsInText, redactUrl as shownUrl } from '../util/redact-url.js';
import {
  claimRun,
  DEFAULT_KEYS,
  ITEM_ATTEMPTS,
  ITEM_BACKOFF_MS,
  jobIdOf,
  legacyRunNote,
  openQueue,
  type QueuedItem,
  type QueueKeys,
  queueKeys,
  queueName,
  readRunMeta,
} from '../worker/queue.js';
import { persistenceWarnings, redactUrl, redisUrl, withRedis } from '../worker/redis.js';
import { type StoredState, stateOfJob } from '../worker/store.js';
import { flagLabel } from './command-table.js';
import type { CommandDeps } from './common.js';
import { parseFlags } from './parse.js';

/** Items planned and looked up in Redis together. */
const BATCH = 500;
/** Items planned at once: a remote source's stat is one round trip, so many may be in flight. */
const PLANNERS = 16;
/** Images read and hashed at once (local files, and remote sources that have no version). */
const READERS = 8;

/** What `enqueue` did. */
export interface EnqueueCounts {
  items: number;
  added: number;
  already_queued: number;
  already_done: number;
  /** Queued jobs of items whose row or image changed since, taken out of the queue. */
  replaced: number;
  /** Items that had ended incomplete (the queue's failed set), put back to be tried again. */
  retried: number;
  /** Items whose job had failed at the service, put back to be submitted again (`--retry-failed`). */
  retried_failed: number;
  rejected: number;
}

/** Options of {@link enqueueItems}. */
export interface EnqueueOptions {
  /** Put back the items whose job failed at the service, to be submitted again. @default false */
  retryFailed?: boolean;
  /** Where images are stat'ed and read (`createSources`). @default the local files */
  sources?: SourceStore;
  /** The queue the items go into. @default the default queue's keys */
  keys?: QueueKeys;
}

/** `kitchen-batch enqueue`: exit 0, 1 when rows were rejected, 2 for usage, 3 for Redis. */
export async function enqueueCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('enqueue', args);
  if (positionals.length !== 1) {
    throw new UsageError(
      'usage: kitchen-batch enqueue <manifest> --redis URL [--queue NAME] [--out DIR] [--retry-failed] [--json]',
    );
  }
  const manifestPath = positionals[0]!;
  const url = redisUrl(values.redis, deps.env);
  const keys = queueKeys(queueName(values.queue, deps.env));
  const access = resolveSourceAccess(sourceFlagOptions(values, deps.env), flagLabel);
  // The default folder moves aside from a local run of another manifest, as `run`'s does.
  const out =
    values.out === undefined
      ? await defaultWorkerOut(deps.cwd, manifestPath, deps.stderr)
      : outLocation(deps.cwd, values.out);
  const manifest = await openManifest(manifestPath, { cwd: deps.cwd, access });
  for (const warning of manifest.warnings) deps.stderr.write(`warning: ${redactUrlsInText(warning)}\n`);
  const sources = createSources(access);
  try {
    return await withRedis(url, async (connection) => {
      for (const warning of await persistenceWarnings(connection, url))
        deps.stderr.write(`warning: ${warning}\n`);
      if (!(await readRunMeta(connection, keys))) {
        const legacy = await legacyRunNote(connection, url);
        if (legacy) deps.stderr.write(`warning: ${legacy}\n`);
      }
      await claimRun(connection, url, keys, {
        out,
        // A remote manifest is recorded as it was named; a local one by its absolute path.
        manifest: isRemoteRef(manifestPath) ? manifestPath : path.resolve(deps.cwd, manifestPath),
        created_at: new Date().toISOString(),
      });
      const counts = await enqueueItems(
        connection,
        manifest.items(),
        (item, message) =>
          deps.stderr.write(`${item.source.file}:${item.source.line}: ${item.id}: ${message}\n`),
        { retryFailed: values['retry-failed'] ?? false, sources, keys },
      );
      if (values.json) {
        deps.stdout.write(`${JSON.stringify({ redis: redactUrl(url), queue: keys.name, out, ...counts })}\n`);
      } else {
        deps.stdout.write(
          `${counts.items} items → queue ${keys.name} at ${redactUrl(url)} (output ${out}): ${counts.added} added, ` +
            `${counts.already_queued} already queued, ${counts.already_done} already done` +
            (counts.replaced > 0 ? `, ${counts.replaced} replaced (row or image changed)` : '') +
            (counts.retried > 0 ? `, ${counts.retried} retried (had ended incomplete)` : '') +
            (counts.retried_failed > 0 ? `, ${counts.retried_failed} failed put back (--retry-failed)` : '') +
            (counts.rejected > 0 ? `, ${counts.rejected} rejected (listed above)` : '') +
            '\n',
        );
      }
      return counts.rejected > 0 ? 1 : 0;
    });
  } finally {
    sources.close();
    await manifest.close();
  }
}

/**
 * Adds the items that are neither queued nor done: 16 items are planned at once (a remote source
 * stat'ed, a local image hashed, eight at most reading bytes), and in batches of 500 the job ids
 * are looked up and the new ones added in one `addBulk`. A rejected row or an image that cannot be
 * read is reported through `reject` (any URL redacted) and not queued.
 */
export async function enqueueItems(
  connection: Redis,
  items: AsyncIterable<Item>,
  reject: (item: Item, message: string) => void,
  options: EnqueueOptions = {},
): Promise<EnqueueCounts> {
  const keys = options.keys ?? DEFAULT_KEYS;
  const queue = openQueue(connection, keys);
  const sources = options.sources ?? localSources;
  const readers = new PQueue({ concurrency: READERS });
  const plan = (item: Item) => planItem(item, sources, readers);
  const counts: EnqueueCounts = {
    items: 0,
    added: 0,
    already_queued: 0,
    already_done: 0,
    replaced: 0,
    retried: 0,
    retried_failed: 0,
    rejected: 0,
  };
  const flush = async (batch: Planned[]) => {
    const ready: Array<{ jobId: string; data: QueuedItem }> = [];
    for (const planned of batch) {
      if ('error' in planned) {
        counts.rejected++;
        reject(planned.item, planned.error);
      } else {
        ready.push(planned);
      }
    }
    // The report's order: an item keeps the place of its first enqueue.
    if (ready.length > 0) {
      const last = await connection.incrby(keys.orderSeq, ready.length);
      await connection.zadd(
        keys.order,
        'NX',
        ...ready.flatMap((r, i) => [last - ready.length + i + 1, r.data.id]),
      );
    }
    // One round trip a batch: does the job exist, is it in the completed set, in the failed set.
    const pipeline = connection.pipeline();
    for (const r of ready) {
      pipeline.exists(queue.toKey(r.jobId));
      pipeline.zscore(queue.keys.completed!, r.jobId);
      pipeline.zscore(queue.keys.failed!, r.jobId);
    }
    const answers = (await pipeline.exec()) ?? [];
    const fresh: typeof ready = [];
    const done: typeof ready = [];
    for (const [i, r] of ready.entries()) {
      const [[existsError, exists], [doneError, doneAt], [failedError, failed]] = [0, 1, 2].map(
        (k) => answers[3 * i + k] ?? [null, null],
      ) as [[Error | null, unknown], [Error | null, unknown], [Error | null, unknown]];
      if (existsError || doneError || failedError) throw existsError ?? doneError ?? failedError;
      if (exists === 0) {
        fresh.push(r);
      } else if (doneAt !== null) {
        done.push(r);
      } else if (failed !== null) {
        // Enqueueing again is the worker mode's rerun: an item that ended incomplete is tried again,
        // and one whose outcome was unknown is sent again (docs/contract.md#worker-mode).
        const job = await queue.getJob(r.jobId);
        if (job) {
          await job.updateData({ ...job.data, resend: true });
          await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        }
        counts.retried++;
      } else {
        counts.already_queued++;
      }
    }
    const putBack = options.retryFailed ? await failedAtService(connection, keys, done) : new Set<string>();
    for (const r of done) {
      if (!putBack.has(r.jobId)) {
        counts.already_done++;
        continue;
      }
      // --retry-failed: the worker submits it again (as `run --retry-failed` does), once.
      const job = await queue.getJob(r.jobId);
      if (job) {
        await job.updateData({ ...job.data, retryFailed: true });
        await job.retry('completed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      }
      counts.retried_failed++;
    }
    if (fresh.length > 0) {
      // An item whose row or image changed has a new job id: its old job, if still waiting, goes.
      const previous = await connection.hmget(keys.items, ...fresh.map((r) => r.data.id));
      for (const [i, old] of previous.entries()) {
        if (old && old !== fresh[i]!.jobId && (await queue.remove(old)) === 1) counts.replaced++;
      }
      await connection.hset(keys.items, Object.fromEntries(fresh.map((r) => [r.data.id, r.jobId])));
      await queue.addBulk(
        fresh.map((r) => ({
          name: 'item',
          data: r.data,
          opts: {
            jobId: r.jobId,
            removeOnComplete: false,
            removeOnFail: false,
            // An item left incomplete by a transient fault (poll, download, 5xx) is tried again later.
            attempts: ITEM_ATTEMPTS,
            backoff: { type: 'exponential', delay: ITEM_BACKOFF_MS },
          },
        })),
      );
    }
    counts.added += fresh.length;
  };
  try {
    let batch: Planned[] = [];
    for await (const planned of mapOrdered(items, PLANNERS, plan)) {
      counts.items++;
      batch.push(planned);
      if (batch.length >= BATCH) {
        await flush(batch);
        batch = [];
      }
    }
    if (batch.length > 0) await flush(batch);
    return counts;
  } finally {
    await queue.close();
  }
}

/** The job ids among `done` whose item failed at the service (its state, written for that job, says `failed`). */
async function failedAtService(
  connection: Redis,
  keys: QueueKeys,
  done: ReadonlyArray<{ jobId: string; data: QueuedItem }>,
): Promise<Set<string>> {
  if (done.length === 0) return new Set();
  const texts = await connection.hmget(keys.states, ...done.map((r) => r.data.id));
  const failed = new Set<string>();
  for (const [i, text] of texts.entries()) {
    const r = done[i]!;
    const state = text ? (JSON.parse(text) as StoredState) : null;
    if (state?.phase === 'failed' && stateOfJob(state, r.jobId, r.data.fp)) failed.add(r.jobId);
  }
  return failed;
}

/** An item planned: its job, or why it cannot be queued. */
type Planned = { jobId: string; data: QueuedItem } | { item: Item; error: string };

/** An item's job, or why it cannot be queued. */
async function planItem(item: Item, sources: SourceStore, readers: PQueue): Promise<Planned> {
  if (item.rejection) {
    return { item, error: redactUrlsInText(`${item.rejection.code}: ${item.rejection.message}`) };
  }
  let identity: string;
  try {
    identity = await sourceIdentity(item.imagePath, sources, readers);
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const why = isRemoteRef(item.imagePath) ? `${code ? `${code}: ` : ''}${message}` : (code ?? message);
    return { item, error: redactUrlsInText(`cannot read ${shownUrl(item.image)} (${why})`) };
  }
  const fp = fingerprint(item, identity);
  return {
    jobId: jobIdOf(item, fp),
    data: {
      id: item.id,
      image: item.image,
      imagePath: item.imagePath,
      module: item.module,
      style: item.style ?? null,
      prompt: item.prompt ?? null,
      configuration: item.configuration ?? null,
      fp,
      line: item.source.line,
    },
  };
}

/**
 * What stands for a source's bytes in its fingerprint: the sha256 of a local file's bytes; for a
 * remote source, its version (ETag, version id, else Last-Modified) and size from a stat (a HEAD, or
 * the head of a GET whose body is dropped), with the URL (its query left out: a pre-signed URL's
 * signature changes at every signing, its object does not) so that two hosts' equal ETags are not
 * one image. A remote source with no version is read once and hashed, as a local file is.
 *
 * The worker's own fingerprint is the sha256 one (`stages/decide.ts`); the two never need to agree:
 * a worker's state names the job it was written for (`queued`, `worker/store.ts`), which is what
 * `report --redis`, `--retry-failed` and the next `enqueue` match it by.
 */
async function sourceIdentity(ref: string, sources: SourceStore, readers: PQueue): Promise<string> {
  const hash = async () =>
    (await readers.add(async () => sha256Stream((await sources.open(ref)).stream()))) as string;
  if (!isRemoteRef(ref)) return hash();
  const info = await sources.stat(ref);
  if (!info.version) return hash();
  const where = sourceKind(ref) === 'http' ? ref.replace(/[?#].*$/s, '') : ref;
  return `v:${JSON.stringify([where, info.size, info.version])}`;
}

/**
 * The default output folder of a worker run (docs/contract.md#output-folder): `output/<stem>`, or
 * `output/<file name>` when a `run` of another manifest holds `output/<stem>` (its journal tells).
 */
async function defaultWorkerOut(
  cwd: string,
  manifest: string,
  stderr: CommandDeps['stderr'],
): Promise<string> {
  const settled = await settleOutDir(
    {
      cwd,
      manifest,
      outDir: defaultOutDir(cwd, manifest),
      outFallback: fallbackOutDir(cwd, manifest),
      manifestRenamed: false,
      renamable: false,
    },
    readLastRun,
    (last) => last,
  );
  if (settled.note) stderr.write(`warning: ${settled.note}\n`);
  return settled.dir;
}
