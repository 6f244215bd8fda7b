/** Where a consumer worker process finds its queue or topic (the COMPARE_CHANNEL env, JSON). */
export type ChannelEnv =
  | { kind: 'sqs'; endpoint: string; queueUrl: string }
  | { kind: 'kafka'; brokers: string[]; topic: string; groupId: string };

/** The parent's side of a queue or topic: sends payments, tells what is still unsettled. */
export interface Channel {
  readonly env: ChannelEnv;
  /** Sends one payment message; `armed` marks it for the crash point. */
  send(key: string, body: string, armed: boolean): Promise<void>;
  /** Messages not yet deleted (SQS) / offsets not yet committed (Kafka). */
  backlog(): Promise<number>;
  close(): Promise<void>;
}
