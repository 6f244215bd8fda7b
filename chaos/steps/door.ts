/**
 * The chaos flow's HTTP door, `POST /orders`, the way each framework's users mount
 * it: Express 5 with `stepsExpress` (no body parser in front), Fastify 5 with
 * `stepsFastify` (Fastify parses the JSON body).
 */
import http from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import type { Flow, StepsRouteOptions } from 'effectively-once';
import type { Idempotency } from 'effectively-once/http';
import { stepsExpress } from 'effectively-once/http/express';
import { stepsFastify } from 'effectively-once/http/fastify';
import { portOf } from '../../kit/payments/payments.js';
import type { StepsFramework } from './args.js';
import { ORDERS_PATH, type OrderBody } from './plan.js';

export interface StepsServer {
  port: number;
  close(): Promise<void>;
}

export async function serveSteps(
  framework: StepsFramework,
  idempotency: Idempotency,
  flow: Flow<OrderBody>,
  options: StepsRouteOptions<OrderBody>,
  port: number,
): Promise<StepsServer> {
  if (framework === 'express') {
    const app = express();
    app.post(ORDERS_PATH, stepsExpress(idempotency, flow, options));
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return {
      port: portOf(server.address()),
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  }
  const app = Fastify();
  app.post(ORDERS_PATH, stepsFastify(idempotency, flow, options));
  await app.listen({ port, host: '127.0.0.1' });
  return {
    port: portOf(app.server.address()),
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}
