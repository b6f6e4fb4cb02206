/**
 * Positions inside JSON text. `JSON.parse` tells us *that* text is bad and usually the offset
 * (`... in JSON at position 42`), but not the line and column a user needs, and for some errors
 * (V8's `Unexpected token 'x', "..." is not valid JSON`) not even the offset. It also never says
 * where each element of an array starts, which the manifest needs for `Item.source.line`.
 * This module fills those gaps with a small strict scanner; values themselves still come from
 * `JSON.parse`.
 */

/** A 1-based line and column. */
export interface LineColumn {
  line: number;
  column: number;
}

/** What went wrong in a piece of JSON text, in words, and where. */
export interface JsonProblem {
  /** The parser's message without V8's echo of the input (which can be long or hold secrets). */
  message: string;
  /** 0-based offset into the text, when known. */
  offset?: number;
  /** 1-based line and column of `offset`, when known. */
  position?: LineColumn;
}

/** Converts a 0-based offset into a 1-based line and column (`\r\n`, `\r` and `\n` end a line). */
export function lineColumnAt(text: string, offset: number): LineColumn {
  let line = 1;
  let lineStart = 0;
  const end = Math.min(offset, text.length);
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || c === 0x0d) {
      // A \r\n pair ends one line, not two.
      if (c === 0x0d && text.charCodeAt(i + 1) === 0x0a) i++;
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: end - lineStart + 1 };
}

/**
 * Parses `text` with `JSON.parse`; on failure returns the problem with its position instead of
 * throwing. The position is the parser's own when its message carries one; otherwise the offset
 * where a strict scan of the text first fails.
 */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; problem: JsonProblem } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, problem: describeJsonError(text, error) };
  }
}

/** Turns a `JSON.parse` error on `text` into a {@link JsonProblem}. */
export function describeJsonError(text: string, error: unknown): JsonProblem {
  const raw = error instanceof Error ? error.message : String(error);
  // V8 (Node 20) appends `, "<the input>" is not valid JSON` to some messages: drop the echo.
  // Long inputs are cut with `...` on either side.
  let message = raw.replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s, '');
  let offset: number | undefined;
  const at = /\s+in JSON at position (\d+)(?: \(line \d+ column \d+\))?$/.exec(message);
  if (at?.[1] !== undefined) {
    offset = Number(at[1]);
    message = message.slice(0, at.index);
  } else if (/^Unexpected end of JSON input/.test(message)) {
    offset = text.length;
  } else {
    offset = scanJsonError(text);
  }
  const problem: JsonProblem = { message };
  if (offset !== undefined) {
    problem.offset = offset;
    problem.position = lineColumnAt(text, offset);
  }
  return problem;
}

/** `"<message> at line L column C"` (or just the message when the position is unknown). */
export function formatJsonProblem(problem: JsonProblem): string {
  if (!problem.position) return problem.message;
  return `${problem.message} at line ${problem.position.line} column ${problem.position.column}`;
}

class ScanError extends Error {
  constructor(readonly offset: number) {
    super(`invalid JSON at ${offset}`);
  }
}

/**
 * A strict JSON scanner over `text` from `start`. It checks the grammar only (no values are
 * built), and on the way can record where the elements of one chosen array begin.
 */
class Scanner {
  constructor(private readonly text: string) {}

  ws(i: number): number {
    const t = this.text;
    while (i < t.length) {
      const c = t.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
    return i;
  }

  /** Scans one value starting at `i` (no leading whitespace) and returns the offset after it. */
  value(i: number, onArrayElement?: (offset: number) => void): number {
    const t = this.text;
    const c = t[i];
    if (c === '{') return this.object(i);
    if (c === '[') return this.array(i, onArrayElement);
    if (c === '"') return this.string(i);
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number(i);
    for (const word of ['true', 'false', 'null']) {
      if (t.startsWith(word, i)) return i + word.length;
    }
    throw new ScanError(i);
  }

  object(i: number): number {
    const t = this.text;
    i = this.ws(i + 1);
    if (t[i] === '}') return i + 1;
    for (;;) {
      if (t[i] !== '"') throw new ScanError(i);
      i = this.ws(this.string(i));
      if (t[i] !== ':') throw new ScanError(i);
      i = this.ws(this.value(this.ws(i + 1)));
      if (t[i] === '}') return i + 1;
      if (t[i] !== ',') throw new ScanError(i);
      i = this.ws(i + 1);
    }
  }

  array(i: number, onElement?: (offset: number) => void): number {
    const t = this.text;
    i = this.ws(i + 1);
    if (t[i] === ']') return i + 1;
    for (;;) {
      onElement?.(i);
      i = this.ws(this.value(i));
      if (t[i] === ']') return i + 1;
      if (t[i] !== ',') throw new ScanError(i);
      i = this.ws(i + 1);
    }
  }

  string(i: number): number {
    const t = this.text;
    i++;
    while (i < t.length) {
      const c = t.charCodeAt(i);
      if (c === 0x22) return i + 1;
      if (c < 0x20) throw new ScanError(i);
      if (c === 0x5c) {
        const e = t[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(t.slice(i + 2, i + 6))) throw new ScanError(i);
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) {
          i += 2;
        } else {
          throw new ScanError(i);
        }
      } else {
        i++;
      }
    }
    throw new ScanError(i);
  }

  number(i: number): number {
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(this.text.slice(i, i + 400));
    if (!m) throw new ScanError(i);
    return i + m[0].length;
  }

  /** Scans the whole text as one JSON document. */
  document(): void {
    const end = this.ws(this.value(this.ws(0)));
    if (end !== this.text.length) throw new ScanError(end);
  }
}

/** Offset of the first grammar error in `text`, or undefined when the scanner finds none. */
export function scanJsonError(text: string): number | undefined {
  try {
    new Scanner(text).document();
    return undefined;
  } catch (error) {
    if (error instanceof ScanError) return error.offset;
    throw error;
  }
}

/**
 * Offsets where the manifest's items begin in valid JSON text: the elements of a top-level array,
 * or of the top-level object's `items` array (the last `items` key, as `JSON.parse` keeps the last).
 * Returns an empty list when there is no such array.
 */
export function locateItems(text: string): number[] {
  const scanner = new Scanner(text);
  const t = text;
  let i = scanner.ws(0);
  if (t[i] === '[') {
    const starts: number[] = [];
    scanner.array(i, (offset) => starts.push(offset));
    return starts;
  }
  if (t[i] !== '{') return [];
  let starts: number[] = [];
  i = scanner.ws(i + 1);
  if (t[i] === '}') return starts;
  for (;;) {
    const keyEnd = scanner.string(i);
    const key: unknown = JSON.parse(t.slice(i, keyEnd));
    i = scanner.ws(scanner.ws(keyEnd) + 1);
    if (key === 'items' && t[i] === '[') {
      const found: number[] = [];
      i = scanner.ws(scanner.array(i, (offset) => found.push(offset)));
      starts = found;
    } else {
      i = scanner.ws(scanner.value(i));
    }
    if (t[i] !== ',') return starts;
    i = scanner.ws(i + 1);
  }
}
