import PQueue from 'p-queue';
import type { RunEvent } from '../pipeline/events.js';
import type { StateLookup } from '../state/table.js';
import { localSources } from '../storage/local-source.js';
import type { OutputStore, SourceStore, StoredObject } from '../storage/types.js';
import { reportItem } from './build.js';
import { ensureThumbnail, planThumbs, ThumbNames } from './thumbs.js';
import { sourceRef } from './write.js';

/** A listing that holds nothing: the thumbnail is made without asking the store first. */
const NOTHING_LISTED: ReadonlyMap<string, StoredObject> = new Map();

/** What {@link EarlyThumbnails} reads. */
export interface EarlyThumbnailsDeps {
  /** The run's outputs: thumbnails go to `thumbs/`, results are read from `results/`. */
  output: OutputStore;
  /** Where source images are read. @default the local files */
  sources?: SourceStore;
  manifestDir: string;
  /** The items report.html lists first (by id): theirs are made as their results arrive. */
  first: ReadonlySet<string>;
  states: StateLookup;
  /** Long side in pixels (report.html's). @default 320 */
  size?: number;
}

/**
 * report.html's thumbnails of the items it lists first, made as their results arrive, one at a time
 * off the critical path, so that the page is ready seconds after the last download instead of
 * after a thumbnail pass over everything. Names are planned as the report plans them.
 */
export class EarlyThumbnails {
  readonly #deps: EarlyThumbnailsDeps;
  readonly #queue = new PQueue({ concurrency: 1 });
  readonly #names = new ThumbNames();
  /** Thumbnails already queued: a photo in five styles is shrunk (or looked up) once. Page-sized. */
  readonly #queued = new Set<string>();

  constructor(deps: EarlyThumbnailsDeps) {
    this.#deps = deps;
  }

  /** Listens to item events: a succeeded item on the page gets its thumbnails queued. */
  readonly onEvent = (event: RunEvent): void => {
    if (event.type !== 'item' || event.status !== 'succeeded' || !this.#deps.first.has(event.id)) return;
    const state = this.#deps.states.get(event.id);
    if (!state) return;
    const { output, manifestDir } = this.#deps;
    const stores = { output, sources: this.#deps.sources ?? localSources };
    const thumbs = planThumbs(reportItem(state), {
      output,
      names: this.#names,
      // A source is named relative to the manifest's folder, not to the outputs.
      sourcePath: (item) => sourceRef(item.image, manifestDir, this.#deps.sources !== undefined),
    });
    for (const job of [thumbs.srcJob, thumbs.outJob]) {
      if (!job || this.#queued.has(job.dest)) continue;
      this.#queued.add(job.dest);
      // The result was stored just now: no thumbnail of it can exist yet, so none is looked up.
      const where = job === thumbs.outJob ? { ...stores, listed: NOTHING_LISTED } : stores;
      void this.#queue.add(async () => {
        await ensureThumbnail(job, this.#deps.size ?? 320, where);
      });
    }
  };

  /** Drops what is still queued (the report makes it, in parallel) and waits for the one in hand. */
  async close(): Promise<void> {
    this.#queue.clear();
    await this.#queue.onIdle();
  }
}
