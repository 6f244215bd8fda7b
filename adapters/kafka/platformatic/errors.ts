/** Kafka errors that say the group generation moved on (a commit is then simply dropped). */
const GENERATION_ERRORS = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'FENCED_INSTANCE_ID',
  'NOT_COORDINATOR',
  'COORDINATOR_NOT_AVAILABLE',
]);

/**
 * `@platformatic/kafka` names a broker error in `apiId`, possibly inside a
 * `MultipleErrors` (`errors`) or a `cause`. The committer recognises kafkajs's `type`
 * instead: return an error carrying it, with the original as cause, or undefined.
 */
export function generationErrorOf(error: unknown): Error | undefined {
  const seen = new Set<unknown>();
  const stack: unknown[] = [error];
  while (stack.length > 0) {
    const e = stack.pop();
    if (e === null || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const apiId = (e as { apiId?: unknown }).apiId;
    if (typeof apiId === 'string' && GENERATION_ERRORS.has(apiId)) {
      return Object.assign(new Error(`Kafka commit refused: ${apiId}`, { cause: error }), {
        type: apiId,
      });
    }
    const nested = (e as { errors?: unknown }).errors;
    if (Array.isArray(nested)) stack.push(...(nested as unknown[]));
    stack.push((e as { cause?: unknown }).cause);
  }
  return undefined;
}
