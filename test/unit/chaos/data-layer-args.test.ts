import { describe, expect, it } from '@jest/globals';
import { UsageError } from '../../../kit/args.js';
import { parseChaosArgs } from '../../../chaos/consumer/args.js';
import { parseHttpChaosArgs } from '../../../chaos/http/args.js';
import { HANDLER_FAULT_KINDS } from '../../../chaos/consumer/handler-faults.js';

describe('chaos args: --data-layer (consumer)', () => {
  it('is pg, with every fault kind, when absent', () => {
    const args = parseChaosArgs(['--broker', 'sqs']);
    expect(args.dataLayer).toBe('pg');
    expect(args.faultKinds).toEqual([...HANDLER_FAULT_KINDS]);
  });

  it('takes a layer and leaves floating out of its default fault kinds', () => {
    const args = parseChaosArgs(['--broker', 'sqs', '--data-layer', 'typeorm']);
    expect(args.dataLayer).toBe('typeorm');
    expect(args.faultKinds).toEqual(HANDLER_FAULT_KINDS.filter((k) => k !== 'floating'));
  });

  it('refuses floating faults through a layer, and an unknown layer', () => {
    expect(() =>
      parseChaosArgs([
        '--broker',
        'sqs',
        '--data-layer',
        'typeorm',
        '--fault-kinds',
        'swallow,floating',
      ]),
    ).toThrow(/floating is for --data-layer pg/);
    expect(() => parseChaosArgs(['--broker', 'sqs', '--data-layer', 'sequelize'])).toThrow(
      UsageError,
    );
  });
});

describe('chaos args: --data-layer (http)', () => {
  it('is pg with the handler-fault routes on when absent', () => {
    const args = parseHttpChaosArgs(['--target', 'http', '--payments', '400']);
    expect(args.dataLayer).toBe('pg');
    expect(args.handlerFaults).toBe(40);
  });

  it('takes a layer with the fault routes off by default', () => {
    const args = parseHttpChaosArgs(['--target', 'http', '--data-layer', 'typeorm']);
    expect(args.dataLayer).toBe('typeorm');
    expect(args.handlerFaults).toBe(0);
  });

  it('refuses fault routes and frameworks other than Fastify through a layer', () => {
    expect(() =>
      parseHttpChaosArgs(['--target', 'http', '--data-layer', 'typeorm', '--handler-faults', '4']),
    ).toThrow(/needs --handler-faults 0/);
    expect(() =>
      parseHttpChaosArgs(['--target', 'http', '--data-layer', 'typeorm', '--framework', 'express']),
    ).toThrow(/--framework fastify/);
  });
});
