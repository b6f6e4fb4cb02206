/**
 * The ceiling of the scale benchmark: the least a client can do per item against the service: POST
 * the image, poll once (again only while the job has not ended), download the result to a file.
 * No preflight, no journal, no report, no rate governor, no retries: what is left is the cost of
 * HTTP itself, which kitchen-batch's own work is measured against.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** One unit of work: an image file and the style to restyle it in. */
export interface MinimalItem {
  id: string;
  file: string;
  style: string;
}

/** What the minimal client measured. */
export interface MinimalFigures {
  seconds: number;
  succeeded: number;
  /** Items per second from the first POST to the last download. */
  rate: number;
}

interface JobBody {
  job?: { id?: string; status?: string; result?: { image_url?: string } };
}

/** Runs every item through POST → poll → download with `concurrency` items in flight. */
export async function runMinimal(
  baseUrl: string,
  items: readonly MinimalItem[],
  outDir: string,
  concurrency: number,
): Promise<MinimalFigures> {
  const headers = { authorization: 'Bearer bench', accept: 'application/json' };
  let next = 0;
  let succeeded = 0;
  const one = async (item: MinimalItem) => {
    const form = new FormData();
    form.append(
      'image',
      new Blob([await readFile(item.file)], { type: 'image/jpeg' }),
      path.basename(item.file),
    );
    form.append('style', item.style);
    const created = (await (
      await fetch(`${baseUrl}/v1/modules/change-style`, { method: 'POST', body: form, headers })
    ).json()) as JobBody;
    const id = created.job?.id;
    if (!id) return;
    let job = created.job;
    while (job?.status !== 'succeeded' && job?.status !== 'failed') {
      job = ((await (await fetch(`${baseUrl}/v1/jobs/${id}`, { headers })).json()) as JobBody).job;
    }
    const url = job.result?.image_url;
    if (!url) return;
    const result = await fetch(url);
    await writeFile(path.join(outDir, `${item.id}.jpg`), Buffer.from(await result.arrayBuffer()));
    succeeded++;
  };
  const started = performance.now();
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) await one(items[i]!);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { seconds, succeeded, rate: succeeded / seconds };
}
