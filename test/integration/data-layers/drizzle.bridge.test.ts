/**
 * Drizzle's bridge (effectively-once/drizzle) over both drivers, node-postgres and
 * postgres.js, on a real Postgres: the checks every bridge passes (bridge-checks.ts).
 */
import { describeBridgeChecks } from './bridge-checks.js';
import { drizzlePgFixture } from './drizzle-pg.fixture.js';
import { drizzlePostgresJsFixture } from './drizzle-postgres-js.fixture.js';

describeBridgeChecks(drizzlePgFixture);
describeBridgeChecks(drizzlePostgresJsFixture);
