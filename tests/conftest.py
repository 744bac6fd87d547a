import os

# Tests never touch the user's compilation cache.
os.environ.setdefault("JAB_NO_CACHE", "1")
