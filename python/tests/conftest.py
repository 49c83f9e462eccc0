import os
import sys

# Import the SDK from this checkout (python/), not an installed copy.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
