import { describe, test, expect } from 'vitest';
describe('format', () => {
  test('pads numbers', () => { expect(String(1).padStart(2, '0')).toBe('01'); });
});
