"""``python -m training.synth``: write the three H&M CSV files."""

import sys

from training.synth.cli import main

sys.exit(main())
