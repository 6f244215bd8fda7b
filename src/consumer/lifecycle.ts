/** Shutdown state shared by the consumer and its runners. */
export interface Lifecycle {
  /** Set when `stop()` begins: deliveries that have not started are released. */
  stopping: boolean;
  /** Aborts when the stop grace period ran out: in-flight handlers are told to give up. */
  readonly hardStop: AbortSignal;
}
