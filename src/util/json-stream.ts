/**
 * Pretty JSON documents written as a stream: exactly the bytes of `JSON.stringify(document, null, 2)`
 * (so readers see no difference) for a document whose last key holds a long array, written
 * element by element so that no string ever holds the whole document (report.json, `plan --json`).
 */

/**
 * Everything before the first element: the document with its last key's array empty, cut at that
 * array's opening bracket.
 */
export function jsonHead(document: object): string {
  const whole = JSON.stringify(document, null, 2);
  return whole.slice(0, whole.lastIndexOf('[') + 1);
}

/** One element of the array, indented as inside it, preceded by a comma unless it is the first. */
export function jsonElement(value: unknown, index: number): string {
  const body = JSON.stringify(value, null, 2).replace(/\n/g, '\n    ');
  return `${index === 0 ? '' : ','}\n    ${body}`;
}

/** The end: closes the array (written `[]` when it stayed empty) and the document. */
export function jsonTail(count: number): string {
  return count === 0 ? ']\n}\n' : '\n  ]\n}\n';
}
