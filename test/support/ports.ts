/**
 * A free loopback port for a server a test starts as a child process (Prometheus, the Pushgateway),
 * which must be told its port: the port is found by listening on 0, then released.
 */
import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
