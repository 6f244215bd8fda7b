/**
 * The charge flow (charge.ts) behind POST /charges on the web core (node:http through
 * toNodeListener), Express (stepsExpress) or Fastify (stepsFastify), in this process.
 * child.ts runs it in a process of its own for tests that kill it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import type { Pool } from 'pg';
import { createIdempotency, toNodeListener, type Idempotency } from 'effectively-once/http';
import { stepsExpress } from 'effectively-once/http/express';
import { stepsFastify } from 'effectively-once/http/fastify';
import { chargeFlow, createOrdersTable, type ChargeHooks } from './charge.js';

/** The doors a steps server can run behind. */
export type StepsFramework = 'web' | 'express' | 'fastify';
export const STEPS_FRAMEWORKS: readonly StepsFramework[] = ['web', 'express', 'fastify'];

/** Options of {@link startStepsServer}. */
export interface StepsServerOptions {
  framework: StepsFramework;
  pool: Pool;
  /** Schema of the orders, key and flows tables. */
  schema: string;
  providerUrl: string;
  hooks?: ChargeHooks;
  /** The flow's name (a renamed deploy is a flow of another shape under the same name). */
  flowName?: string;
  leaseMs?: number;
  /** How long a retry waits for a live owner before 409. Default 200. */
  lockTimeoutMs?: number;
  callTimeoutMs?: number;
  port?: number;
  /**
   * Called with each answer before it is written (a test kills the process there): the
   * web core only (the adapters forward the same answer).
   */
  beforeAnswer?: (status: number) => void;
}

/** A running steps server. */
export interface StepsServer {
  readonly port: number;
  readonly url: string;
  readonly idempotency: Idempotency;
  close(): Promise<void>;
}

/** Starts the charge flow's server. */
export async function startStepsServer(options: StepsServerOptions): Promise<StepsServer> {
  await createOrdersTable(options.pool);
  const idempotency = createIdempotency({
    pool: options.pool,
    schema: options.schema,
    scope: 'tenant',
    lockTimeoutMs: options.lockTimeoutMs ?? 200,
  });
  const flow = chargeFlow(options.providerUrl, options.hooks, {
    ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
    ...(options.flowName !== undefined ? { name: options.flowName } : {}),
  });
  const routeOptions = options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {};
  const port = options.port ?? 0;
  let close: () => Promise<void>;
  let bound: number;
  if (options.framework === 'fastify') {
    const app = Fastify();
    const handler = stepsFastify(idempotency, flow, routeOptions);
    app.post('/charges', handler);
    await app.listen({ port, host: '127.0.0.1' });
    bound = (app.server.address() as AddressInfo).port;
    close = () => app.close();
  } else {
    let listener: http.RequestListener;
    if (options.framework === 'express') {
      const app = express();
      app.post('/charges', stepsExpress(idempotency, flow, routeOptions));
      listener = app;
    } else {
      const endpoint = idempotency.steps(flow, routeOptions);
      listener = toNodeListener(async (request) => {
        const response = await endpoint(request);
        options.beforeAnswer?.(response.status);
        return response;
      });
    }
    const server = http.createServer(listener);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    bound = (server.address() as AddressInfo).port;
    close = () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
  }
  return {
    port: bound,
    url: `http://127.0.0.1:${bound}`,
    idempotency,
    close: async () => {
      await close();
      await idempotency.close();
    },
  };
}
