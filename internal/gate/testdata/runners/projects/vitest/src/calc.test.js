import { describe, test, it, expect } from 'vitest';
describe('calc', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('subtracts', () => { expect(2 - 1).toBe(0); });
  test.skip('divides', () => {});
  test.todo('multiplies');
  describe('nested', () => {
    it('deep', () => {});
  });
});
test('top level', () => {});
