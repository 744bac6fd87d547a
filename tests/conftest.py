import os
import tempfile

# Subprocesses of one test session share a fresh compilation cache, so the same tiny model
# is compiled once rather than in every test; the user's own cache is never touched.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="jab-test-cache-")
os.environ.pop("JAB_NO_CACHE", None)
