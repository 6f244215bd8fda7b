import type { SendCharges } from './broker.js';
import { FAULTS, seededRandom, sleep } from './faults.js';
import { ACCOUNTS, type Charge } from './payments.js';

/** What the producer will send, and what the ledger must show at the end. */
export interface Plan {
  charges: Charge[];
  /** chargeId → how many times it is sent (1, 2 or 3). */
  sends: Map<string, number>;
  expectedTotalCents: number;
  expectedByAccount: Map<string, number>;
}

/** N logical charges with seeded amounts and accounts, and which of them get resent. */
export function planCharges(messages: number, seed: number): Plan {
  const random = seededRandom(seed);
  const hex = (digits: number) =>
    Array.from({ length: digits }, () => Math.floor(random() * 16).toString(16)).join('');
  const charges: Charge[] = [];
  const sends = new Map<string, number>();
  const expectedByAccount = new Map<string, number>();
  let expectedTotalCents = 0;
  for (let i = 0; i < messages; i++) {
    // One key per logical charge, minted before the first attempt (a v4-shaped id).
    const chargeId = `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
    const account = ACCOUNTS[Math.floor(random() * ACCOUNTS.length)] ?? 'acct_01';
    const amountCents = 100 + Math.floor(random() * 49_900);
    charges.push({ chargeId, account, amountCents, currency: 'EUR' });
    const roll = random();
    sends.set(chargeId, roll < FAULTS.secondResendShare ? 3 : roll < FAULTS.resendShare ? 2 : 1);
    expectedTotalCents += amountCents;
    expectedByAccount.set(account, (expectedByAccount.get(account) ?? 0) + amountCents);
  }
  return { charges, sends, expectedTotalCents, expectedByAccount };
}

/** Counters the producer keeps while it runs. */
export interface ProducerStats {
  logicalSent: number;
  messagesSent: number;
  resends: number;
}

/**
 * Sends the plan in batches of 10, paced over a couple of seconds so the workers are
 * busy while it runs. A resend is what a producer does when its request timed out
 * although the broker stored the message: it sends again with the same idempotency key
 * and a byte-identical body, a little later. To the broker it is a new message (SQS
 * gives it a new MessageId, Kafka a new offset).
 */
export async function produce(
  sendCharges: SendCharges,
  plan: Plan,
  stats: ProducerStats,
  onChange: () => void,
): Promise<void> {
  const pending: Array<Promise<void>> = [];
  const send = async (charges: Charge[]) => {
    for (let attempt = 1; ; attempt++) {
      try {
        await sendCharges(charges);
        stats.messagesSent += charges.length;
        onChange();
        return;
      } catch (error) {
        // A real retry: same keys, same bodies. Give up only after a few tries.
        if (attempt >= 5) throw error;
        await sleep(100 * attempt);
      }
    }
  };
  const batchPauseMs = Math.min(40, 2_500 / Math.max(1, plan.charges.length / 10));
  for (let i = 0; i < plan.charges.length; i += 10) {
    const batch = plan.charges.slice(i, i + 10);
    await send(batch);
    stats.logicalSent += batch.length;
    for (const charge of batch) {
      const times = plan.sends.get(charge.chargeId) ?? 1;
      for (let resend = 1; resend < times; resend++) {
        stats.resends += 1;
        pending.push(sleep(50 + Math.random() * 400 * resend).then(() => send([charge])));
      }
    }
    await sleep(batchPauseMs);
  }
  await Promise.all(pending);
}
