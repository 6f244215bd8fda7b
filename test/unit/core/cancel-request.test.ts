/**
 * `cancelBackend` sends the protocol's CancelRequest on a socket of its own, with the
 * client's SSL settings. The real-Postgres path (plain TCP) is covered by
 * test/integration/core/abandoned-handlers.test.ts; here a loopback stand-in of the
 * server checks the bytes, and the SSL negotiation a Postgres with `ssl = on` expects.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Pool, PoolClient } from 'pg';
import { cancelBackend } from '../../../src/tx/cancel.js';

const SSL_REQUEST = 80877103;
const CANCEL_REQUEST = 80877102;

let tls: { key: Buffer; cert: Buffer };
beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), 'eo-cancel-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
      ].concat(['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')]),
      { stdio: 'ignore' },
    );
    tls = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const servers: Server[] = [];
afterAll(() => servers.forEach((s) => s.close()));

/** Reads a socket's bytes in exact-length pieces. */
class Reader {
  private buffered = Buffer.alloc(0);
  private wanted: { n: number; resolve: (b: Buffer) => void } | undefined;

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      this.serve();
    });
  }

  read(n: number): Promise<Buffer> {
    return new Promise((resolve) => {
      this.wanted = { n, resolve };
      this.serve();
    });
  }

  private serve(): void {
    const wanted = this.wanted;
    if (wanted === undefined || this.buffered.length < wanted.n) return;
    this.wanted = undefined;
    const piece = this.buffered.subarray(0, wanted.n);
    this.buffered = this.buffered.subarray(wanted.n);
    wanted.resolve(piece);
  }
}

interface Received {
  ssl: boolean;
  code: number;
  pid: number;
  secret: number;
}

/** A server that takes one startup packet (after an optional SSLRequest), records it and hangs up. */
async function fakePostgres(): Promise<{ port: number; received: Promise<Received> }> {
  let report!: (r: Received) => void;
  const received = new Promise<Received>((resolve) => (report = resolve));
  const server = createServer((raw) => {
    void (async () => {
      let socket: Socket = raw;
      let reader = new Reader(raw);
      let packet = await reader.read(8);
      let ssl = false;
      if (packet.readInt32BE(4) === SSL_REQUEST) {
        ssl = true;
        raw.removeAllListeners('data');
        raw.write('S');
        socket = new TLSSocket(raw, { isServer: true, key: tls.key, cert: tls.cert });
        reader = new Reader(socket);
        packet = await reader.read(8);
      }
      const rest = await reader.read(packet.readInt32BE(0) - 8);
      report({
        ssl,
        code: packet.readInt32BE(4),
        pid: rest.readInt32BE(0),
        secret: rest.readInt32BE(4),
      });
      socket.end();
    })();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { port: address.port, received };
}

const client = (port: number, ssl: unknown): PoolClient =>
  ({
    processID: 4242,
    secretKey: -17,
    host: '127.0.0.1',
    port,
    connectionParameters: { ssl },
  }) as unknown as PoolClient;
const pool = { options: {} } as unknown as Pool;

describe('cancelBackend', () => {
  it('sends a CancelRequest with the backend pid and secret key, and resolves when the server hangs up', async () => {
    const server = await fakePostgres();
    await cancelBackend(client(server.port, false), pool, 5000);
    expect(await server.received).toEqual({
      ssl: false,
      code: CANCEL_REQUEST,
      pid: 4242,
      secret: -17,
    });
  });

  it('negotiates SSL first when the client connected with SSL, then sends it encrypted', async () => {
    const server = await fakePostgres();
    await cancelBackend(client(server.port, { rejectUnauthorized: false }), pool, 5000);
    expect(await server.received).toEqual({
      ssl: true,
      code: CANCEL_REQUEST,
      pid: 4242,
      secret: -17,
    });
  });

  it('rejects without a connected backend to name, or when nothing listens', async () => {
    await expect(cancelBackend({} as PoolClient, pool, 5000)).rejects.toThrow(/backend key data/);
    const server = await fakePostgres();
    servers.pop()?.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(cancelBackend(client(server.port, false), pool, 5000)).rejects.toThrow();
  });
});
