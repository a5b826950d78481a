"""``python -m training.fit``: train and write one bundle per task."""

import sys

from training.fit.run import main

sys.exit(main())
