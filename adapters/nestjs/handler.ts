/**
 * `@OnceHandler(name)`: marks a provider's method as the handler of the module's
 * consumer `name`. A method decorator discovered at bootstrap with Nest's
 * DiscoveryService, as `@Cron()` and `@OnEvent()` are: the handler stays a method of
 * an ordinary injectable class, with its dependencies injected (a PrismaService, a
 * repository), and one class may hold the handlers of several consumers.
 */
import { DiscoveryService } from '@nestjs/core';

/** What `@OnceHandler` records on a method. */
export interface OnceHandlerMetadata {
  /** The consumer's name, a key of the module's `consumers`. */
  consumer: string;
}

const marker = DiscoveryService.createDecorator<OnceHandlerMetadata>();

/** The discoverable decorator behind {@link OnceHandler} (for DiscoveryService lookups). */
export const ONCE_HANDLER = marker;

/**
 * Marks `method(message, ctx)` as the handler of consumer `name`: it runs inside the
 * delivery's claim transaction; write the effect through `ctx.tx` (a pg client, or
 * the module's data layer's transaction object) and return; throw to roll back and
 * retry. The delivery is acked only after the verified COMMIT.
 *
 * ```ts
 * @Injectable()
 * export class OrderHandlers {
 *   constructor(@Inject(Mailer) private readonly mailer: Mailer) {}
 *   @OnceHandler('orders')
 *   async placed(order: Order, ctx: HandlerContext<Order>) { … }
 * }
 * ```
 */
export function OnceHandler(name: string): MethodDecorator {
  return marker({ consumer: name });
}
