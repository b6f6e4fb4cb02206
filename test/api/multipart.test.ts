import { describe, expect, it } from 'vitest';
import { multipartBody } from '../../src/api/multipart.js';

/** Parses a body as a server would (undici's multipart parser). */
async function parse(body: Buffer, contentType: string): Promise<FormData> {
  return new Response(body, { headers: { 'content-type': contentType } }).formData();
}

describe('multipart/form-data bodies', () => {
  it('carry the file bytes exactly, its name and type, and the text fields', async () => {
    const image = Buffer.from([0xff, 0xd8, 0xff, 0x0d, 0x0a, 0x2d, 0x2d, 0x00, 0xff, 0xd9]); // CRLF and -- inside
    const { body, contentType } = multipartBody([
      { name: 'image', data: image, filename: 'küche 1.jpg', contentType: 'image/jpeg' },
      { name: 'style', value: 'scandinavian' },
      { name: 'prompt', value: 'darker worktop,\r\nmatte "black" handles' },
    ]);
    expect(contentType).toMatch(/^multipart\/form-data; boundary=----kitchen-batch-[0-9a-f]{24}$/);
    const form = await parse(body, contentType);
    const file = form.get('image') as File;
    expect(Buffer.from(await file.arrayBuffer())).toEqual(image);
    expect(file.name).toBe('küche 1.jpg');
    expect(file.type).toBe('image/jpeg');
    expect(form.get('style')).toBe('scandinavian');
    expect(form.get('prompt')).toBe('darker worktop,\r\nmatte "black" handles');
  });

  it('never lets a name break out of its quoted header parameter', async () => {
    const { body, contentType } = multipartBody([
      {
        name: 'image',
        data: Buffer.from('x'),
        filename: 'a"; name="style.jpg\r\nX: y',
        contentType: 'image/jpeg',
      },
    ]);
    const form = await parse(body, contentType);
    expect([...form.keys()]).toEqual(['image']);
    expect(body.toString('latin1')).not.toContain('\r\nX: y');
  });

  it('uses a new boundary for every body (the body is built afresh per attempt)', () => {
    const a = multipartBody([{ name: 'style', value: 'modern' }]);
    const b = multipartBody([{ name: 'style', value: 'modern' }]);
    expect(a.contentType).not.toBe(b.contentType);
  });
});
