/**
 * Item id bases of a glob's matches: one naming rule for local globs and S3 globs (issue 32), so
 * `kitchens/*.jpg` on disk and `s3://bucket/kitchens/*.jpg` name their items alike.
 */
import path from 'node:path';

/** The file name of a slash-separated path or key without its extension: the default item id. */
export function stem(file: string): string {
  return path.posix.parse(file).name;
}

/**
 * The id base of each match (slash-separated paths or keys, in the order given): the file name's
 * stem, prefixed `<rowId>-` when the row has an id. We use the file name for every glob match, also
 * when only one file matches, so that adding a file later does not rename the items already there
 * (resume keys on the id). Files of one glob that share a name but not the extension (`sku123.jpg`,
 * `sku123.png`: a marketing folder) take the extension too (`sku123-jpg`, `sku123-png`;
 * docs/contract.md#ids), since a glob row cannot give them ids of their own.
 */
export function globIdBases(matches: readonly string[], rowId: string | undefined): string[] {
  // Case-insensitively: `K1.jpg` and `k1.png` name the same result file on macOS and Windows.
  // Only the extension can tell such files apart: two `k1.jpg` in different folders stay a duplicate.
  const counts = new Map<string, number>();
  const count = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
  const key = (match: string) => stem(match).toLowerCase();
  const withExt = (match: string) => `${key(match)}\0${path.posix.extname(match).toLowerCase()}`;
  for (const match of matches) {
    count(key(match));
    count(withExt(match));
  }
  return matches.map((match) => {
    const shared = (counts.get(key(match)) ?? 0) > 1 && counts.get(withExt(match)) === 1;
    const ext = path.posix.extname(match).slice(1);
    const name = shared && ext ? `${stem(match)}-${ext}` : stem(match);
    return rowId === undefined ? name : `${rowId}-${name}`;
  });
}
