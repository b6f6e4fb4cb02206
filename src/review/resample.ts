/**
 * The review's resampling: a decoded rendition of any size and 1 to 4 channels to the SIDE×SIDE
 * RGBA grid on which every signature is measured ({@link stretch}), by area averaging.
 *
 * @module
 */

/** Side of the square renditions compared (both images are squeezed to it). */
export const SIDE = 64;

/**
 * Buffers that {@link stretch} only needs while it runs (it is synchronous, so one set serves every
 * call): a signature allocates only what it keeps.
 */
const scratch = {
  rgba: new Uint8Array(SIDE * SIDE * 4),
  /** The column pass's SIDE×h floats, grown to the tallest rendition up to {@link ROWS_KEPT}. */
  rows: new Float32Array(SIDE * SIDE * 4),
};

/** Floats of the column pass kept between calls (1 MB); a taller rendition gets its own, once. */
const ROWS_KEPT = SIDE * 1024 * 4;

/**
 * A w×h rendition of 1 to 4 channels (grey, grey+alpha, RGB, RGBA) resampled to SIDE×SIDE RGBA by
 * area averaging: both images are compared on one grid whatever their aspect. Each output pixel
 * is the mean of the input area it covers, so a rendition at least SIDE px on its short side
 * (sharp's `fit: 'outside'`) is only ever shrunk, as a box filter would, never blurred by
 * upsampling (which measurably lowers the edge maps' similarity of good restyles).
 * Returns a scratch buffer (RGBA), overwritten by the next call.
 */
export function stretch(data: Uint8Array, w: number, h: number, channels: number): Uint8Array {
  const xs = areaSpans(w);
  const ys = areaSpans(h);
  // Offsets of green, blue and alpha in a pixel: grey ones read the one channel three times; one
  // without alpha reads any channel for it and is made opaque at the end (no branch in the loops).
  const green = channels < 3 ? 0 : 1;
  const blue = channels < 3 ? 0 : 2;
  const opaque = channels === 1 || channels === 3;
  const alpha = opaque ? 0 : channels - 1;
  // Columns first: w×h → SIDE×h, one float per channel. The two passes are written out, not
  // shared: a generic pass (with an RGBA copy of the input) measured 2.4 ms slower per
  // signature, and this runs for every result.
  const size = SIDE * h * 4;
  if (size > scratch.rows.length && size <= ROWS_KEPT) scratch.rows = new Float32Array(size);
  const rows = size <= scratch.rows.length ? scratch.rows : new Float32Array(size);
  const { head, headWeight, from, to, tail, tailWeight, scale } = xs;
  for (let y = 0; y < h; y++) {
    const line = y * w;
    for (let x = 0; x < SIDE; x++) {
      let i = (line + head[x]!) * channels;
      let weight = headWeight[x]!;
      let r = data[i]! * weight;
      let g = data[i + green]! * weight;
      let b = data[i + blue]! * weight;
      let a = data[i + alpha]! * weight;
      const end = (line + to[x]!) * channels;
      for (i = (line + from[x]!) * channels; i < end; i += channels) {
        r += data[i]!;
        g += data[i + green]!;
        b += data[i + blue]!;
        a += data[i + alpha]!;
      }
      i = (line + tail[x]!) * channels;
      weight = tailWeight[x]!;
      const o = 4 * (y * SIDE + x);
      rows[o] = (r + data[i]! * weight) * scale;
      rows[o + 1] = (g + data[i + green]! * weight) * scale;
      rows[o + 2] = (b + data[i + blue]! * weight) * scale;
      rows[o + 3] = opaque ? 255 : (a + data[i + alpha]! * weight) * scale;
    }
  }
  // Then rows: SIDE×h → SIDE×SIDE, each of a row's SIDE×4 floats down the rows its cell covers.
  const out = scratch.rgba;
  const stride = SIDE * 4;
  for (let y = 0; y < SIDE; y++) {
    const top = ys.head[y]! * stride;
    const bottom = ys.tail[y]! * stride;
    const topWeight = ys.headWeight[y]!;
    const bottomWeight = ys.tailWeight[y]!;
    const first = ys.from[y]! * stride;
    const last = ys.to[y]! * stride;
    for (let c = 0; c < stride; c++) {
      let value = rows[top + c]! * topWeight + rows[bottom + c]! * bottomWeight;
      for (let i = first + c; i < last; i += stride) value += rows[i]!;
      out[y * stride + c] = Math.round(value * ys.scale);
    }
  }
  return out;
}

/**
 * One axis's area averaging ({@link stretch}): output cell i of SIDE covers input
 * pixels `from[i]` to `to[i]` (excluded) whole, plus a part (`headWeight`, `tailWeight`, in
 * pixels) of the pixels `head[i]` and `tail[i]` at its two ends; the sum times `scale` is its mean.
 */
interface AreaSpans {
  head: Int32Array;
  headWeight: Float64Array;
  from: Int32Array;
  to: Int32Array;
  tail: Int32Array;
  tailWeight: Float64Array;
  scale: number;
}

/** Area spans by axis length: results of a catalogue come in a few sizes. */
const spansBySize = new Map<number, AreaSpans>();

/** Sizes whose spans are kept (about 2 KB each). */
const SPANS_KEPT = 64;

/**
 * For each of SIDE output cells along an axis of `size` input pixels, the input it covers: the
 * pixels wholly inside it are summed as they are (most of the work, no multiplication), the two
 * at its ends by the part of them it covers.
 */
function areaSpans(size: number): AreaSpans {
  const known = spansBySize.get(size);
  if (known) return known;
  const step = size / SIDE;
  const spans: AreaSpans = {
    head: new Int32Array(SIDE),
    headWeight: new Float64Array(SIDE),
    from: new Int32Array(SIDE),
    to: new Int32Array(SIDE),
    tail: new Int32Array(SIDE),
    tailWeight: new Float64Array(SIDE),
    scale: 1 / step,
  };
  for (let i = 0; i < SIDE; i++) {
    const start = i * step;
    const end = Math.min(size, start + step);
    const whole = Math.ceil(start);
    const past = Math.floor(end);
    if (past < whole) {
      // Inside one pixel (an axis shorter than SIDE): that pixel's part, nothing whole.
      spans.head[i] = Math.floor(start);
      spans.headWeight[i] = end - start;
      continue;
    }
    spans.head[i] = Math.max(0, whole - 1);
    spans.headWeight[i] = whole - start;
    spans.from[i] = whole;
    spans.to[i] = past;
    spans.tail[i] = Math.min(size - 1, past);
    spans.tailWeight[i] = past < size ? end - past : 0;
  }
  if (spansBySize.size >= SPANS_KEPT) spansBySize.clear();
  spansBySize.set(size, spans);
  return spans;
}
