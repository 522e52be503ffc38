# The session's fresh EMBER_CACHE_DIR comes from tests/conftest.py (every test package
# compiles: dynamo, aot and the models write kernel, FX-graph and aot cache entries).
