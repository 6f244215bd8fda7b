import { RoutingError, RoutingViolationError } from '../errors.js';
import type { ResolvedRouting, RouteTarget } from './options.js';

/**
 * Asks the user's route where a key lives, and checks what can be checked cheaply of the
 * one hard rule (a key always routes to the same database): the answer names a known
 * database, and it is the one this door answered for the same key the last time it saw
 * it (a bounded memory of recent keys, oldest forgotten first). A route that changes its
 * mind is refused before anything is claimed: in the other database the key may already
 * be committed, and claiming it here would apply it twice.
 */
export class Router {
  private readonly names: ReadonlySet<string>;
  /** `scope NUL key` → database, in insertion order (re-inserted when seen again). */
  private readonly recent = new Map<string, string>();

  constructor(private readonly routing: ResolvedRouting) {
    this.names = new Set(routing.databases.map((d) => d.name));
  }

  /** The database of `target`, or the {@link RoutingError} that says why there is none. */
  route(target: RouteTarget): string {
    let name: unknown;
    try {
      name = this.routing.route(target);
    } catch (cause) {
      throw new RoutingError('the route threw', { key: target.key, scope: target.scope }, cause);
    }
    if (typeof name !== 'string' || !this.names.has(name))
      throw new RoutingError(
        `the route answered ${JSON.stringify(name)}, not one of ${[...this.names].join(', ')}`,
        { key: target.key, scope: target.scope },
      );
    this.remember(target, name);
    return name;
  }

  private remember(target: RouteTarget, name: string): void {
    const limit = this.routing.rememberKeys;
    if (limit === 0) return;
    const id = `${target.scope}\u0000${target.key}`;
    const before = this.recent.get(id);
    if (before !== undefined && before !== name)
      throw new RoutingViolationError(target.key, before, name, target.scope);
    this.recent.delete(id);
    this.recent.set(id, name);
    if (this.recent.size > limit) {
      const oldest = this.recent.keys().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
  }
}
