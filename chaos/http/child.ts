/**
 * The HTTP chaos server process: the payment API (kit/payments/payments.ts, the
 * framework of EO_HTTP_FRAMEWORK) and, when EO_CHAOS_FAULT_PORT is set, the
 * handler-fault routes on Express and Fastify behind one port. It speaks
 * kit/payments/child.ts's stdout protocol and reads the same env (spawn.ts starts
 * it with `entry`): `ready` once both listen, `committed` after each COMMIT of either,
 * and the armed SIGKILL right after the Nth of them.
 */
import { chaosReplicaSafe } from '../failover/replica-safe.js';
import http from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import pg from 'pg';
import type { CommittedEvent } from 'effectively-once/http';
import { emit, env } from '../../kit/payments/child-protocol.js';
import { startPaymentServer, type Framework } from '../../kit/payments/payments.js';
import { openDataLayer, type LayerName } from '../../kit/data-layers/index.js';
import { createFaultEndpoints } from './fault-endpoints.js';
import { startLayerPaymentServer } from './layer-payments.js';
import { expressFaultRoutes } from './fault-express.js';
import { fastifyFaultRoutes } from './fault-fastify.js';
import { FaultSide } from './fault-side.js';

const schema = env('EO_HTTP_SCHEMA');
const databaseUrl = env('EO_HTTP_DATABASE_URL');
const pool = new pg.Pool({
  connectionString: databaseUrl,
  options: `-c search_path=${schema}`,
  max: 20,
});
pool.on('error', () => undefined);
const killAfter = Number(env('EO_HTTP_KILL_AFTER_COMMITS', '0'));
let commits = 0;
const onCommitted = ({ key, status }: CommittedEvent): void => {
  commits++;
  emit({ t: 'committed', key, status });
  // The crash point: committed, nothing sent. No cleanup runs, no goodbye.
  if (killAfter > 0 && commits === killAfter) process.kill(process.pid, 'SIGKILL');
};
// EO_CHAOS_DATA_LAYER (--data-layer): the payment handler written through that layer.
const layerName = process.env['EO_CHAOS_DATA_LAYER'] as LayerName | undefined;
const data = layerName === undefined ? undefined : await openDataLayer(layerName, databaseUrl, 20);
const payments =
  data === undefined
    ? await startPaymentServer({
        framework: env('EO_HTTP_FRAMEWORK') as Framework,
        pool,
        schema,
        port: Number(env('EO_HTTP_PORT', '0')),
        idempotency: { onCommitted, replicaSafe: chaosReplicaSafe() },
      })
    : await startLayerPaymentServer({
        data,
        pool,
        schema,
        port: Number(env('EO_HTTP_PORT', '0')),
        onCommitted,
      });
const faultPort = Number(env('EO_CHAOS_FAULT_PORT', '0'));
const faults = faultPort > 0 ? await serveFaults(faultPort) : undefined;
emit({ t: 'ready', port: payments.port });

/** Express and Fastify behind one server: `/express/…` to Express, the rest to Fastify. */
async function serveFaults(port: number): Promise<{ close(): Promise<void> }> {
  const side = await FaultSide.create(databaseUrl, schema);
  const endpoints = createFaultEndpoints({ pool, databaseUrl, schema, onCommitted });
  const expressApp = express();
  expressFaultRoutes(expressApp, endpoints, side);
  const server = http.createServer();
  const fastify = Fastify({
    serverFactory: (handler) => {
      server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
        side.watch(req, res);
        if (req.url?.startsWith('/express/')) expressApp(req, res);
        else handler(req, res);
      });
      return server;
    },
  });
  await fastifyFaultRoutes(fastify, endpoints, side);
  await fastify.listen({ port, host: '127.0.0.1' });
  return {
    close: async () => {
      server.closeAllConnections();
      await fastify.close();
      await endpoints.close();
      await side.close();
    },
  };
}

const stop = (): void => {
  // A handler that ignores its signal may hold close() up: the process ends regardless.
  setTimeout(() => process.exit(0), 5000).unref();
  void Promise.all([payments.close(), faults?.close()])
    .then(() => data?.close())
    .then(() => pool.end())
    .then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
