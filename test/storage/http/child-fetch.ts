/**
 * Run in a child process by https.test.ts: the environment (NODE_EXTRA_CA_CERTS, NODE_USE_ENV_PROXY,
 * HTTPS_PROXY) only takes effect at process start. First a control request through Node's global
 * agent (which the environment points at the proxy), then the fetcher; prints one JSON line.
 */
import https from 'node:https';
import { fetchSourceBytes } from '../../../src/storage/http/fetch.js';

const url = process.argv[2] ?? '';
const control = await new Promise<string>((resolve) => {
  https
    .get(url, (res) => {
      res.resume();
      resolve(`status ${res.statusCode}`);
    })
    .on('error', (error) => resolve(`error ${(error as NodeJS.ErrnoException).code ?? error.message}`));
});
try {
  const got = await fetchSourceBytes(url, { allowPrivate: true, retries: 0 });
  const size = got.notModified ? 0 : got.size;
  process.stdout.write(`${JSON.stringify({ control, ok: true, size, etag: got.etag })}\n`);
} catch (error) {
  const code = (error as { code?: string }).code;
  process.stdout.write(`${JSON.stringify({ control, ok: false, code, message: String(error) })}\n`);
}
