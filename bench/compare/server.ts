/**
 * One payment server process for the comparison: Express 5, `POST /charges` behind the
 * contender named by COMPARE_CONTENDER (apps.ts). Speaks kit/payments/spawn.ts's
 * stdout protocol (`ready`, `committed`) and reads its EO_HTTP_* environment.
 */
import http from 'node:http';
import express from 'express';
import { emit, env, envPool } from '../../kit/payments/child-protocol.js';
import { portOf } from '../../kit/payments/payments.js';
import { mountCharges } from './apps.js';
import { isContender } from './contenders.js';
import { CrashPoint } from './crash-point.js';

const contender = env('COMPARE_CONTENDER');
if (!isContender(contender)) throw new Error(`unknown contender ${contender}`);
const { pool, schema } = envPool();

const app = express();
mountCharges({ app, contender, pool, schema, crash: new CrashPoint() });
// One error answer for every contender: the status a middleware set (409 in progress), else 500.
app.use(
  (error: unknown, _req: express.Request, res: express.Response, next: express.NextFunction) => {
    if (res.headersSent) return next(error);
    res
      .status(res.statusCode >= 400 ? res.statusCode : 500)
      .json({ error: error instanceof Error ? error.message : String(error) });
  },
);

const server = http.createServer(app);
await new Promise<void>((resolve) =>
  server.listen(Number(env('EO_HTTP_PORT', '0')), '127.0.0.1', resolve),
);
emit({ t: 'ready', port: portOf(server.address()) });

process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void pool.end().then(() => process.exit(0)));
});
