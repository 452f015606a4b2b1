from tests.partition._fakes import install

install()
