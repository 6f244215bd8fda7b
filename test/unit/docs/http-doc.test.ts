import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { blocks, repoRoot } from '../../../scripts/docs-sync.js';

// docs/http.md (servers) and docs/webhooks.md (receivers) embed their examples like every
// doc does (npm run docs:sync rewrites them; test/unit/docs/docs.test.ts fails when one
// drifts from its runnable file).
const doc = fs.readFileSync(path.join(repoRoot, 'docs', 'http.md'), 'utf8');
const webhooks = fs.readFileSync(path.join(repoRoot, 'docs', 'webhooks.md'), 'utf8');
const source = (file: string): string => fs.readFileSync(path.join(repoRoot, file), 'utf8');

function fieldsOf(file: string, name: string): string[] {
  const body =
    new RegExp(`export interface ${name}\\b[^{]*\\{([\\s\\S]*?)\\n\\}`).exec(source(file))?.[1] ??
    '';
  return [...body.matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1] ?? '');
}

describe('docs/http.md', () => {
  const synced = blocks(doc);

  it('embeds the runnable examples', () => {
    expect(synced.map((b) => b.file)).toEqual([
      'examples/http-payments.ts',
      'examples/http-express.ts',
      'examples/http-fastify.ts',
      'examples/http-node.ts',
      'examples/sql/idempotency-keys-table.sql',
    ]);
  });

  it('keeps every embedded copy in step with its file', () => {
    expect(synced.filter((b) => !b.fresh).map((b) => b.file)).toEqual([]);
  });

  it('documents every option of createIdempotency in the options table', () => {
    const names = [
      ...fieldsOf('src/http/options.ts', 'IdempotencyOptions'),
      ...fieldsOf('src/shared-options.ts', 'StoreOptions'),
      ...fieldsOf('src/shared-options.ts', 'TransactionOptions'),
    ];
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((name) => !new RegExp(`\\| \`${name}\` +\\|`).test(doc))).toEqual([]);
  });

  it('documents every context field', () => {
    const context =
      /export interface IdempotencyContext(?:<[^>]*>)? \{([\s\S]*?)\n\}/.exec(
        source('src/http/context.ts'),
      )?.[1] ?? '';
    const fields = [...context.matchAll(/^ {2}(?:readonly )?(\w+)[(?:]/gm)].map((m) => m[1] ?? '');
    expect(fields.length).toBeGreaterThan(6);
    for (const name of fields) expect(doc).toMatch(new RegExp(`\\| \`${name}(\\(\\))?\` +\\|`));
  });

  it('names every error code the http side answers with', () => {
    const codes = [...source('src/http/errors.ts').matchAll(/'(EO_[A-Z_]+)'/g)].map(
      (m) => m[1] ?? '',
    );
    expect(codes.length).toBeGreaterThan(4);
    for (const code of [...codes, 'EO_CLAIM_BUSY', 'EO_HANDLER_TIMEOUT', 'EO_COMMIT_UNKNOWN'])
      expect(doc).toContain(code);
  });

  it('shows the table the migration creates', () => {
    const columns = /const COLUMNS = `([\s\S]*?)`/.exec(source('src/http/store.ts'))?.[1] ?? '';
    const names = [...columns.matchAll(/^\s+(\w+)\s+\w/gm)].map((m) => m[1] ?? '');
    expect(names).toContain('idempotency_key');
    for (const name of names.filter((n) => n !== 'PRIMARY'))
      expect(doc).toMatch(new RegExp(`^  ${name} +`, 'm'));
  });
});

describe('docs/webhooks.md', () => {
  it('embeds the runnable receiver', () => {
    expect(blocks(webhooks).map((b) => b.file)).toEqual(['examples/http-webhooks.ts']);
    expect(blocks(webhooks).filter((b) => !b.fresh)).toEqual([]);
  });

  it('documents every webhook option in the options table', () => {
    const names = fieldsOf('src/http/webhooks.ts', 'WebhookOptions');
    expect(names.length).toBeGreaterThan(3);
    expect(names.filter((name) => !new RegExp(`\\| \`${name}\` +\\|`).test(webhooks))).toEqual([]);
  });

  it('names every preset and the webhook error codes', () => {
    const presets = /export const webhookSources = \{([\s\S]*?)\n\}( as const)?;/.exec(
      source('src/http/webhooks.ts'),
    )?.[1];
    const names = [...(presets ?? '').matchAll(/^ {2}(\w+):/gm)].map((m) => m[1] ?? '');
    expect(names.length).toBeGreaterThan(2);
    for (const name of names) expect(webhooks).toContain(`\`webhookSources.${name}\``);
    for (const code of [
      'EO_WEBHOOK_UNVERIFIED',
      'EO_WEBHOOK_ID_INVALID',
      'EO_IDEMPOTENCY_KEY_MISSING',
    ])
      expect(webhooks).toContain(code);
  });
});
