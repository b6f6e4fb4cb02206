import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What the server saw of one request. */
export interface Seen {
  method: string;
  /** Path and query exactly as received. */
  url: string;
  headers: http.IncomingHttpHeaders;
  /** performance.now() at arrival. */
  at: number;
}

/** A route: gets the request, its response, and how many times this path was hit (1-based). */
export type Route = (req: http.IncomingMessage, res: http.ServerResponse, hit: number) => void;

/**
 * A real source server on 127.0.0.1 that records every connection and request, for the fetcher's
 * tests (no HTTP mocking: the fetcher talks to a socket). Routes are matched on the path alone.
 */
export class SourceServer {
  readonly requests: Seen[] = [];
  readonly routes = new Map<string, Route>();
  connections = 0;
  readonly #hits = new Map<string, number>();
  readonly #sockets = new Set<Socket>();
  readonly server: http.Server;

  constructor(tls?: { key: string; cert: string }) {
    const handler: http.RequestListener = (req, res) => {
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      this.requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        at: performance.now(),
      });
      const hit = (this.#hits.get(path) ?? 0) + 1;
      this.#hits.set(path, hit);
      const route = this.routes.get(path);
      if (route) route(req, res, hit);
      else {
        res.statusCode = 404;
        res.end('not here');
      }
    };
    this.server = tls ? https.createServer(tls, handler) : http.createServer(handler);
    this.server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      this.connections++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** A URL on this server, by IP literal. */
  url(path: string, host = '127.0.0.1'): string {
    const scheme = this.server instanceof https.Server ? 'https' : 'http';
    return `${scheme}://${host}:${this.port}${path}`;
  }

  /** Requests for one path (query ignored). */
  seen(path: string): Seen[] {
    return this.requests.filter((r) => r.url.split('?')[0] === path);
  }

  async stop(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A self-signed certificate for 127.0.0.1 and localhost, made with the system's openssl. */
export function selfSigned(): { key: string; cert: string; certPath: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'kb-tls-'));
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-days',
      '1',
      '-subj',
      '/CN=kitchen-batch test source',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { stdio: 'ignore' },
  );
  return {
    key: readFileSync(keyPath, 'utf8'),
    cert: readFileSync(certPath, 'utf8'),
    certPath,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Bytes that start like a JPEG, so a payload is recognisable in assertions. */
export function jpegLike(size: number): Buffer {
  const bytes = Buffer.alloc(size, 0x5a);
  bytes.set([0xff, 0xd8, 0xff, 0xe0]);
  return bytes;
}
