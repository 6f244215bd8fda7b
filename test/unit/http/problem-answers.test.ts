import { describe, expect, it } from '@jest/globals';
import {
  ClaimBusyError,
  CommitFailedError,
  DatabaseError,
  HandlerError,
  TransactionAbortedError,
  type EffectivelyOnceError,
} from '../../../src/errors.js';
import { databaseUnavailable, problemResponse } from '../../../src/http/problem.js';

const settings = {
  problemTypeBase: 'urn:test:',
  mismatchStatus: 422,
  retryAfterSeconds: 3,
  header: 'Idempotency-Key',
};

/** An error as pg reports one the server sent. */
function serverError(code: string, message: string, severity = 'ERROR'): Error {
  return Object.assign(new Error(message), { code, severity });
}

const SECRET = 'ssn 123-45-6789 in "people_ssn_key"';

describe('problem answers', () => {
  it.each<[string, EffectivelyOnceError, number]>([
    [
      'a swallowed statement',
      new TransactionAbortedError('k', 'aborted', serverError('22P02', SECRET)),
      500,
    ],
    ['a deferred constraint', new CommitFailedError('k', serverError('23503', SECRET)), 500],
    ['the pool or the database', new DatabaseError('connect', new Error(SECRET)), 503],
    ['a busy key', new ClaimBusyError('k', 5, serverError('55P03', SECRET)), 409],
    ['a connection lost mid-handler', new HandlerError('k', 1, new Error(SECRET)), 503],
    [
      'a read-only node, swallowed',
      new TransactionAbortedError('k', 'aborted', serverError('25006', SECRET)),
      503,
    ],
  ])('%s: a fixed detail, no error text', async (_what, error, status) => {
    const response = problemResponse(error, settings);
    expect(response.status).toBe(status);
    const text = await response.text();
    expect(text).not.toContain('123-45-6789');
    expect(text).not.toContain('people_ssn_key');
    const body = JSON.parse(text) as { detail: string; code: string };
    expect(body.code).toBe(error.code);
    if (status !== 500) expect(response.headers.get('retry-after')).toBe('3');
    else expect(response.headers.get('retry-after')).toBeNull();
  });

  it('the same detail for every error of one problem type', async () => {
    const detail = async (error: EffectivelyOnceError): Promise<string> =>
      ((await problemResponse(error, settings).json()) as { detail: string }).detail;
    expect(await detail(new DatabaseError('connect', new Error('a')))).toBe(
      await detail(new DatabaseError('claim', new Error('b'))),
    );
  });

  it('databaseUnavailable: what the server sent, through causes; never a downstream errno', () => {
    expect(databaseUnavailable(serverError('25006', 'read-only'))).toBe(true);
    expect(databaseUnavailable(serverError('57P01', 'admin shutdown', 'FATAL'))).toBe(true);
    expect(databaseUnavailable(new Error('wrapped', { cause: serverError('25006', 'x') }))).toBe(
      true,
    );
    expect(databaseUnavailable(serverError('23505', 'duplicate key'))).toBe(false);
    expect(
      databaseUnavailable(Object.assign(new Error('fetch failed'), { code: 'ECONNREFUSED' })),
    ).toBe(false);
    expect(databaseUnavailable(undefined)).toBe(false);
  });
});
