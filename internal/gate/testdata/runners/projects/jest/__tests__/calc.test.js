describe('calc', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('subtracts', () => { expect(2 - 1).toBe(0); });
  test.skip('divides', () => {});
  test.todo('multiplies');
  describe('nested', () => {
    it('deep', () => {});
    it.each([[1, 2], [2, 3]])('inc %i', (a, b) => { expect(a + 1).toBe(b); });
  });
});
test('top level', () => {});
