const assert = require('assert');
describe('calc', function () {
  it('adds', function () { assert.strictEqual(1 + 1, 2); });
  it('subtracts', function () { assert.strictEqual(2 - 1, 0); });
  it.skip('divides', function () {});
  it('multiplies');
  describe('nested', function () {
    it('deep', function () {});
  });
  it('skips itself', function () { this.skip(); });
});
it('top level', function () {});
