import { describe, it, test } from 'node:test';
import assert from 'node:assert';

describe('calc', () => {
  it('adds', () => { assert.strictEqual(1 + 1, 2); });
  it('subtracts', () => { assert.strictEqual(2 - 1, 0); });
  it.skip('divides', () => {});
  it.todo('multiplies');
  describe('nested', () => {
    it('deep', () => {});
  });
});

test('top level', async (t) => {
  await t.test('sub one', () => {});
  await t.test('sub two', (t) => { t.skip('not now'); });
});

test('skip option', { skip: true }, () => {});
test.todo('todo top');
test('todo that runs', { todo: 'soon' }, () => { throw new Error('x'); });
