describe('format', function () {
  it('pads numbers', function () {});
});
