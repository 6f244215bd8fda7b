import type { Logger } from '../types.js';
import { PublishError } from './errors.js';
import type { OutboxRecord, Publisher } from './record.js';
import type { RelayPublishScope, RelayTelemetry } from './telemetry.js';

/** Publishes one destination's claimed rows; resolves with the ids that failed and why. */
export type PublishStep = (
  destination: string,
  records: OutboxRecord[],
) => Promise<Map<string, unknown>>;

/** What {@link publishStep} needs from the relay. */
export interface PublishStepOptions {
  publishers: ReadonlyMap<string, Publisher>;
  publishTimeoutMs: number;
  telemetry: RelayTelemetry | undefined;
  logger: Logger;
}

/**
 * One publisher call per destination, bounded by `publishTimeoutMs` (its signal aborts
 * then, and every row of the call counts as failed), followed by the telemetry hooks.
 */
export function publishStep(options: PublishStepOptions): PublishStep {
  const { publishers, publishTimeoutMs, telemetry, logger } = options;

  /** Telemetry's view of one publisher call; a throwing hook must not stop publishing. */
  function observePublish(
    destination: string,
    records: OutboxRecord[],
  ): { records: readonly OutboxRecord[]; end(failures: ReadonlyMap<string, unknown>): void } {
    if (telemetry === undefined) return { records, end: () => undefined };
    let scope: RelayPublishScope;
    try {
      scope = telemetry.startPublish(destination, records);
    } catch (err) {
      logger.warn({ err }, 'effectively-once: relay telemetry startPublish threw');
      return { records, end: () => undefined };
    }
    return {
      records: scope.records.length === records.length ? scope.records : records,
      end: (failures) => {
        try {
          scope.end(failures);
        } catch (err) {
          logger.warn({ err }, 'effectively-once: relay telemetry end threw');
        }
      },
    };
  }

  async function publishObserved(
    destination: string,
    records: readonly OutboxRecord[],
  ): Promise<Map<string, unknown>> {
    const failures = new Map<string, unknown>();
    const publisher = publishers.get(destination);
    if (publisher === undefined) {
      const error = new PublishError(destination, 'no publisher is configured for it');
      for (const r of records) failures.set(r.id, error);
      return failures;
    }
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new PublishError(destination, `no answer within ${publishTimeoutMs} ms`);
        controller.abort(error);
        reject(error);
      }, publishTimeoutMs);
    });
    try {
      const result = await Promise.race([publisher.publish(records, controller.signal), timeout]);
      if (result instanceof Map) {
        for (const [id, error] of result as ReadonlyMap<string, unknown>) failures.set(id, error);
      }
    } catch (error) {
      for (const r of records) failures.set(r.id, error);
    } finally {
      clearTimeout(timer);
    }
    return failures;
  }

  return async (destination, claimed) => {
    const observed = observePublish(destination, claimed);
    const failures = await publishObserved(destination, observed.records);
    observed.end(failures);
    return failures;
  };
}
