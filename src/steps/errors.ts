/** The errors of steps, each with its own `code` (the registry is EffectivelyOnceError's). */
import { EffectivelyOnceError } from '../errors.js';

/**
 * A step's or a call's result (or a flow's answer body) that JSON cannot hold (a bigint,
 * a cycle, a function): the step's transaction rolls back; the flow stays where it was.
 */
export class StepResultNotJsonError extends EffectivelyOnceError {
  constructor(flow: string, step: string, cause: unknown) {
    super(
      'EO_STEP_RESULT_NOT_JSON',
      `Step "${step}" of flow "${flow}" returned a value JSON cannot hold`,
      {
        retryable: false,
        cause,
        details: { flow, step },
      },
    );
  }
}

/**
 * The key's recorded steps disagree with this deploy's flow: a step renamed, reordered,
 * removed, or another `version`. Nothing runs; the flow stays unfinished, for a deploy
 * that knows its steps (or for you to settle by hand: `inspect` shows them).
 */
export class FlowStepsChangedError extends EffectivelyOnceError {
  constructor(
    flow: string,
    key: string,
    problem: string,
    details: { position?: number; recorded?: string; requested?: string } = {},
  ) {
    super('EO_FLOW_STEPS_CHANGED', `Flow "${flow}" cannot resume key "${short(key)}": ${problem}`, {
      retryable: false,
      details: { flow, key, ...details },
    });
  }
}

/**
 * This owner lost the flow: another took it over after its lease expired (a higher
 * fencing token), so nothing this owner records commits. What it did outside (a call
 * already sent) was sent with the same derived key as the new owner's.
 */
export class FlowFencedError extends EffectivelyOnceError {
  constructor(flow: string, key: string, fence: number) {
    super(
      'EO_FLOW_FENCED',
      `Flow "${flow}" key "${short(key)}" was taken over (fence ${fence} is stale)`,
      {
        retryable: true,
        details: { flow, key, fence },
      },
    );
  }
}

/** The key was recorded for another flow, origin or input: refused, nothing run. */
export class FlowKeyReusedError extends EffectivelyOnceError {
  constructor(key: string, reason: 'flow' | 'origin' | 'input') {
    super('EO_FLOW_KEY_REUSED', `Key "${short(key)}" was first used for another ${reason}`, {
      retryable: false,
      details: { key, reason },
    });
  }
}

/**
 * A step or a call failed transiently (the flow's `finalError` did not make it final):
 * the recovery point stays, the lease is released; a retry resumes at this step.
 */
export class StepFailedError extends EffectivelyOnceError {
  constructor(flow: string, step: string, cause: unknown) {
    super('EO_STEP_FAILED', `Step "${step}" of flow "${flow}" failed; it is retried on resume`, {
      retryable: true,
      cause,
      details: { flow, step },
    });
  }
}

function short(key: string, max = 80): string {
  return key.length <= max ? key : `${key.slice(0, max)}…(${key.length} chars)`;
}
