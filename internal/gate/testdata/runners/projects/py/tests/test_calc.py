import pytest

def test_add():
    assert 1 + 1 == 2

def test_sub():
    assert 2 - 1 == 0

@pytest.mark.skip(reason="later")
def test_later():
    pass

@pytest.mark.parametrize("a,b", [(1, 1), (4, 2)])
def test_div(a, b):
    assert a / b >= 1

@pytest.mark.xfail(reason="bug 12")
def test_known_bug():
    assert False

@pytest.mark.xfail(reason="fixed?")
def test_xpass():
    assert True

@pytest.mark.xfail(strict=True)
def test_strict_xpass():
    assert True

@pytest.fixture
def broken():
    raise RuntimeError("no db")

def test_needs_db(broken):
    pass

class TestCalc:
    def test_method(self):
        assert True

    def test_skipped_inside(self):
        pytest.skip("not here")
